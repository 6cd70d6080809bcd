// labtool: servers and clients for the real-cluster checks, in one static
// binary (the entrypoint of the labtool image, next to a static busybox).
//
//	labtool serve [--tcp 8080] [--udp 8081] [--http 8082]
//	labtool tcp HOST PORT COUNT [--timeout 2s]
//	labtool udp HOST PORT COUNT [--timeout 2s]
//	labtool dns NAME [--timeout 5s]
//	labtool loop HOST PORT (--duration 60s | --until-file PATH) [--interval 10ms] [--timeout 2s] [--trace stderr]
//	labtool http URL [--timeout 5s]
//	labtool hold udp|tcp HOST PORT [--interval 200ms] [--timeout 2s] [--until-file PATH]
//	labtool proxy [--port 15001] [--timeout 5s]
//
// Exit status: 0 done, 1 a check failed (the reason on stderr), 2 usage.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

const usage = `usage:
  labtool serve [--tcp PORT] [--udp PORT] [--http PORT]
      TCP: writes the pod name and a newline, then echoes until EOF;
      UDP: answers each datagram with the pod name and a newline;
      HTTP: /hostname and / the pod name, /clientip the client's ip:port.
      The name is $POD_NAME, else the hostname. Exits 0 on SIGTERM.
  labtool tcp HOST PORT COUNT [--timeout 2s]
      COUNT connections one after another; prints the first line of each.
  labtool udp HOST PORT COUNT [--timeout 2s]
      COUNT datagrams from one unconnected socket of HOST's family; prints
      each reply's first line; fails when a reply comes from another address
      than HOST:PORT.
  labtool dns NAME [--timeout 5s]
      Resolves NAME as a pod does (/etc/resolv.conf: search, ndots); prints
      its IPv4 addresses.
  labtool loop HOST PORT (--duration 60s | --until-file PATH) [--interval 10ms] [--timeout 2s] [--trace stderr]
      Connects, reads the first line and closes, again and again; at the end,
      or on SIGTERM, prints {"ok":N,"failed":N,"errors":{...},"byServer":{...}}.
      --trace stderr: each attempt as a JSON line on stderr,
      {"t":MS,"local":"IP:PORT","server":..} or with "error" (the local
      address is known right after connect(), also for a timeout).
  labtool http URL [--timeout 5s]
      GET URL; prints the body.
  labtool hold udp|tcp HOST PORT [--interval 200ms] [--timeout 2s] [--until-file PATH]
      Keeps one connected socket (TCP: to labtool serve's echo), a request
      every --interval; on a socket error connects a new one. One JSON line
      per event: {"socket":N,"event":"connected","local":..,"remote":..},
      "reply" with "server" (a socket's first reply and each change of
      server), "error" with "error" (ECONNABORTED, EOF, ...), "timeout" (no
      reply within --timeout; the socket is kept); at the end (the file
      exists, or SIGTERM) {"event":"summary","sockets":N,"replies":{..},
      "errors":{..},"timeouts":N}.
  labtool proxy [--port 15001] [--timeout 5s]
      A sidecar proxy's shape: accepts the connections a pod's iptables
      REDIRECT sends it, reads each one's SO_ORIGINAL_DST, connects onward
      to it, reads the backend's first line, then tells the client (and
      stdout) {"orig":"IP:PORT","backend":"NAME"} as its first line and
      relays both ways. Its own connections must be left out of the
      REDIRECT (e.g. by its uid, as Istio's 1337).
`

// usageError: wrong arguments (exit 2, with the usage).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// args are a command's positionals and --flag values; flags may come before,
// between or after the positionals, as --name value or --name=value.
type args struct {
	pos   []string
	flags map[string]string
}

func parseArgs(argv []string, known ...string) (args, error) {
	a := args{flags: map[string]string{}}
	for i := 0; i < len(argv); i++ {
		s := argv[i]
		if !strings.HasPrefix(s, "--") || s == "--" {
			a.pos = append(a.pos, s)
			continue
		}
		name, value, inline := strings.Cut(s[2:], "=")
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		if !ok {
			return a, usageError{fmt.Sprintf("unknown flag --%s", name)}
		}
		if !inline {
			if i+1 >= len(argv) {
				return a, usageError{fmt.Sprintf("--%s needs a value", name)}
			}
			i++
			value = argv[i]
		}
		a.flags[name] = value
	}
	return a, nil
}

func (a args) duration(name string, def time.Duration) (time.Duration, error) {
	v, ok := a.flags[name]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, usageError{fmt.Sprintf("--%s: invalid duration %q (use e.g. 500ms, 2s)", name, v)}
	}
	return d, nil
}

func (a args) want(n int, names string) error {
	if len(a.pos) != n {
		return usageError{fmt.Sprintf("expected %s, got %d argument(s)", names, len(a.pos))}
	}
	return nil
}

func run(argv []string) error {
	if len(argv) == 0 {
		return usageError{"no command"}
	}
	cmd, rest := argv[0], argv[1:]
	switch cmd {
	case "serve":
		return cmdServe(rest)
	case "tcp":
		return cmdTCP(rest)
	case "udp":
		return cmdUDP(rest)
	case "dns":
		return cmdDNS(rest)
	case "loop":
		return cmdLoop(rest)
	case "http":
		return cmdHTTP(rest)
	case "hold":
		return cmdHold(rest)
	case "proxy":
		return cmdProxy(rest)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}

func main() {
	err := run(os.Args[1:])
	if err == nil {
		return
	}
	cmd := "labtool"
	if len(os.Args) > 1 {
		cmd += " " + os.Args[1]
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", cmd, err)
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	os.Exit(1)
}
