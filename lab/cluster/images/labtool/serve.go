package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

// podName: what the servers answer with, so a client can tell which backend
// it reached. The pod's name is its hostname; POD_NAME (downward API) wins.
func podName() string {
	if n := os.Getenv("POD_NAME"); n != "" {
		return n
	}
	n, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return n
}

type servers struct {
	closers []io.Closer
	// The bound addresses, by protocol (port 0 picks a free one: tests).
	tcp, udp, http net.Addr
}

func (s *servers) Close() {
	for _, c := range s.closers {
		c.Close()
	}
}

// startServers listens on the given ports (empty: not that protocol), on
// every address of the pod, and logs one line per listener.
func startServers(name, tcpPort, udpPort, httpPort string) (*servers, error) {
	s := &servers{}
	fail := func(err error) (*servers, error) {
		s.Close()
		return nil, err
	}
	if tcpPort != "" {
		ln, err := net.Listen("tcp", ":"+tcpPort)
		if err != nil {
			return fail(err)
		}
		s.closers, s.tcp = append(s.closers, ln), ln.Addr()
		go acceptTCP(ln, name)
		fmt.Printf("labtool serve: tcp %s as %s\n", ln.Addr(), name)
	}
	if udpPort != "" {
		pc, err := net.ListenPacket("udp", ":"+udpPort)
		if err != nil {
			return fail(err)
		}
		s.closers, s.udp = append(s.closers, pc), pc.LocalAddr()
		go answerUDP(pc, name)
		fmt.Printf("labtool serve: udp %s as %s\n", pc.LocalAddr(), name)
	}
	if httpPort != "" {
		ln, err := net.Listen("tcp", ":"+httpPort)
		if err != nil {
			return fail(err)
		}
		srv := &http.Server{Handler: httpHandler(name)}
		s.closers, s.http = append(s.closers, srv), ln.Addr()
		go srv.Serve(ln)
		fmt.Printf("labtool serve: http %s as %s\n", ln.Addr(), name)
	}
	return s, nil
}

func acceptTCP(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed
		}
		go func() {
			defer c.Close()
			if _, err := io.WriteString(c, name+"\n"); err != nil {
				return
			}
			io.Copy(c, c)
		}()
	}
}

func answerUDP(pc net.PacketConn, name string) {
	buf := make([]byte, 64*1024)
	reply := []byte(name + "\n")
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		pc.WriteTo(reply, from)
	}
}

func httpHandler(name string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.RemoteAddr) })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	return mux
}

func cmdServe(argv []string) error {
	a, err := parseArgs(argv, "tcp", "udp", "http")
	if err != nil {
		return err
	}
	if err := a.want(0, "no arguments"); err != nil {
		return err
	}
	if a.flags["tcp"]+a.flags["udp"]+a.flags["http"] == "" {
		return usageError{"give at least one of --tcp, --udp, --http"}
	}
	// Before listening: a SIGTERM right after the first log line is handled.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := startServers(podName(), a.flags["tcp"], a.flags["udp"], a.flags["http"])
	if err != nil {
		return err
	}
	defer s.Close()
	<-ctx.Done()
	return nil
}
