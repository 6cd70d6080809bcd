package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// labtool hold: a long-lived connected client, as a DNS client on a
// connected UDP socket is, to see svcmap destroy a socket whose backend left
// its Service. One socket at a time, connect()ed once, a request every
// interval; a goroutine is always blocked reading it, so an error the kernel
// reports on the socket (ECONNABORTED from bpf_sock_destroy) is seen at
// once, whatever the writer is doing. On an error the socket is closed and a
// new one connected. A reply that does not come within the timeout is
// counted and the socket kept (what a client stuck on a dead backend sees).

// holdEvent: one line of `labtool hold`'s output.
type holdEvent struct {
	Socket int    `json:"socket,omitempty"`
	Event  string `json:"event"`
	Local  string `json:"local,omitempty"`
	Remote string `json:"remote,omitempty"`
	Server string `json:"server,omitempty"`
	Error  string `json:"error,omitempty"`
	// summary only
	Sockets  int            `json:"sockets,omitempty"`
	Replies  map[string]int `json:"replies,omitempty"`
	Errors   map[string]int `json:"errors,omitempty"`
	Timeouts int            `json:"timeouts,omitempty"`
}

type holdOptions struct {
	proto    string // "udp" or "tcp"
	addr     string
	interval time.Duration
	timeout  time.Duration
}

// holdSocket: the reading side of one connected socket.
type holdSocket struct {
	conn    net.Conn
	replies chan string // the server's name, per reply
	failed  chan error  // the read error that ended the socket (1)
	done    chan struct{}
}

func openHold(ctx context.Context, o holdOptions) (*holdSocket, error) {
	d := net.Dialer{Timeout: o.timeout}
	conn, err := d.DialContext(ctx, o.proto, o.addr)
	if err != nil {
		return nil, err
	}
	s := &holdSocket{conn: conn, replies: make(chan string), failed: make(chan error, 1), done: make(chan struct{})}
	go s.read(o.proto)
	return s, nil
}

// read: UDP, each datagram's first line is the server's name; TCP (labtool
// serve), the first line is its name and each echoed line a reply.
func (s *holdSocket) read(proto string) {
	var next func() (string, error)
	if proto == "udp" {
		buf := make([]byte, 64*1024)
		next = func() (string, error) {
			n, err := s.conn.Read(buf)
			if err != nil {
				return "", err
			}
			line, _, _ := strings.Cut(string(buf[:n]), "\n")
			return line, nil
		}
	} else {
		r := bufio.NewReader(s.conn)
		name := ""
		next = func() (string, error) {
			line, err := r.ReadString('\n')
			if err != nil {
				return "", err
			}
			if name == "" {
				name = strings.TrimSuffix(line, "\n") // the greeting
			}
			return name, nil
		}
	}
	for {
		name, err := next()
		if err != nil {
			s.failed <- err
			return
		}
		select {
		case s.replies <- name:
		case <-s.done:
			return
		}
	}
}

func (s *holdSocket) close() {
	close(s.done)
	s.conn.Close()
}

// runHold keeps a connected socket until ctx ends, emitting its events; it
// returns the summary.
func runHold(ctx context.Context, o holdOptions, emit func(holdEvent)) holdEvent {
	sum := holdEvent{Event: "summary", Replies: map[string]int{}, Errors: map[string]int{}}
	fail := func(n int, err error) {
		name := errorName(err)
		sum.Errors[name]++
		emit(holdEvent{Socket: n, Event: "error", Error: name})
	}
	wait := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	for n := 1; ctx.Err() == nil; n++ {
		s, err := openHold(ctx, o)
		if err != nil {
			if ctx.Err() == nil {
				fail(n, err)
				wait(o.interval)
			}
			continue
		}
		sum.Sockets = n
		emit(holdEvent{Socket: n, Event: "connected", Local: s.conn.LocalAddr().String(), Remote: s.conn.RemoteAddr().String()})
		holdOne(ctx, o, s, n, &sum, emit, fail)
		s.close()
		if ctx.Err() == nil {
			wait(o.interval)
		}
	}
	return sum
}

// holdOne exchanges on one socket until it fails or ctx ends.
func holdOne(ctx context.Context, o holdOptions, s *holdSocket, n int, sum *holdEvent, emit func(holdEvent), fail func(int, error)) {
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	last := ""
	var sentAt time.Time // zero: nothing in flight
	seq := 0
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-s.replies:
			sentAt = time.Time{}
			sum.Replies[name]++
			if name != last {
				emit(holdEvent{Socket: n, Event: "reply", Server: name})
				last = name
			}
		case err := <-s.failed:
			fail(n, err)
			return
		case <-tick.C:
			if !sentAt.IsZero() && time.Since(sentAt) > o.timeout {
				sum.Timeouts++
				emit(holdEvent{Socket: n, Event: "timeout"})
				sentAt = time.Time{}
			}
			seq++
			if _, err := fmt.Fprintf(s.conn, "hold %d\n", seq); err != nil {
				var rerr error
				select {
				case rerr = <-s.failed:
				case <-time.After(o.timeout):
				}
				fail(n, failCause(err, rerr))
				return
			}
			if sentAt.IsZero() {
				sentAt = time.Now()
			}
		}
	}
}

// failCause: why a socket ended, from the error its write got and the one
// its reader got (nil: none within the timeout). The kernel hands a socket's
// pending error to whichever call comes first: when svcmap destroys a TCP
// socket during a write, the write gets ECONNABORTED and the reader then
// finds the socket closed (EOF). A destroyed UDP socket is also
// disconnected, so its write fails (EDESTADDRREQ) while the cause waits for
// the reader. The cause is the error that is not such a consequence.
func failCause(writeErr, readErr error) error {
	switch {
	case readErr == nil:
		return writeErr
	case consequence(writeErr):
		return readErr
	case consequence(readErr):
		return writeErr
	}
	return readErr
}

// consequence: an error that says the socket is gone, not why.
func consequence(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.EDESTADDRREQ) || errors.Is(err, syscall.EPIPE)
}

func cmdHold(argv []string) error {
	a, err := parseArgs(argv, "interval", "timeout", "until-file")
	if err != nil {
		return err
	}
	if err := a.want(3, "udp|tcp HOST PORT"); err != nil {
		return err
	}
	o := holdOptions{proto: a.pos[0], addr: net.JoinHostPort(a.pos[1], a.pos[2])}
	if o.proto != "udp" && o.proto != "tcp" {
		return usageError{fmt.Sprintf("the protocol is udp or tcp, not %q", o.proto)}
	}
	if o.interval, err = a.duration("interval", 200*time.Millisecond); err != nil {
		return err
	}
	if o.timeout, err = a.duration("timeout", 2*time.Second); err != nil {
		return err
	}
	if o.interval <= 0 || o.timeout <= 0 {
		return usageError{"--interval and --timeout must be > 0"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if f := a.flags["until-file"]; f != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			for ctx.Err() == nil {
				if _, err := os.Stat(f); err == nil {
					cancel()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	enc := json.NewEncoder(os.Stdout)
	emit := func(e holdEvent) { enc.Encode(e) }
	emit(runHold(ctx, o, emit))
	return nil
}
