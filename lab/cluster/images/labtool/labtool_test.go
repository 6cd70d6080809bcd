// The parts that need no cluster, over loopback (test/cluster/images.test.ts
// runs this in a network namespace of its own).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	a, err := parseArgs([]string{"--timeout", "1s", "host", "80", "--interval=5ms", "3"}, "timeout", "interval")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.pos) != 3 || a.pos[0] != "host" || a.pos[2] != "3" || a.flags["timeout"] != "1s" || a.flags["interval"] != "5ms" {
		t.Fatalf("got %+v", a)
	}
	if _, err := parseArgs([]string{"--nope", "1"}, "timeout"); err == nil {
		t.Fatal("an unknown flag is an error")
	}
	if _, err := parseArgs([]string{"--timeout"}, "timeout"); err == nil {
		t.Fatal("a flag without its value is an error")
	}
	if _, err := (args{flags: map[string]string{"timeout": "soon"}}).duration("timeout", 0); err == nil {
		t.Fatal("a bad duration is an error")
	}
}

func TestErrorName(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if n := errorName(refused); n != "ECONNREFUSED" {
		t.Fatalf("got %q", n)
	}
	if n := errorName(io.EOF); n != "EOF" {
		t.Fatalf("got %q", n)
	}
}

func TestServersAndClients(t *testing.T) {
	s, err := startServers("pod-a", "0", "0", "0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	port := func(a net.Addr) string { _, p, _ := net.SplitHostPort(a.String()); return p }
	tcp := net.JoinHostPort("127.0.0.1", port(s.tcp))

	if line, err := firstLine(context.Background(), tcp, time.Second); err != nil || line != "pod-a" {
		t.Fatalf("tcp first line %q, %v", line, err)
	}
	// Echo after the name.
	c, err := net.Dial("tcp", tcp)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "ping\n")
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "pod-a\nping\n" {
		t.Fatalf("tcp echo %q", got)
	}

	conn, err := net.ListenUDP("udp4", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	to := netip.MustParseAddrPort(net.JoinHostPort("127.0.0.1", port(s.udp)))
	line, from, err := udpExchange(conn, to, []byte("x"), time.Second)
	if err != nil || line != "pod-a" || from != to {
		t.Fatalf("udp %q from %s, %v", line, from, err)
	}

	// The udp command, with a socket of the address's family.
	for _, host := range []string{"127.0.0.1", "::1"} {
		if err := cmdUDP([]string{host, port(s.udp), "2"}); err != nil {
			t.Fatalf("labtool udp %s: %v", host, err)
		}
	}

	for path, want := range map[string]string{"/hostname": "pod-a", "/": "pod-a"} {
		resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", port(s.http)) + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Fatalf("GET %s: %q", path, body)
		}
	}

	// loop: stops at the file, counts by server; then against a closed port.
	stop := filepath.Join(t.TempDir(), "stop")
	go func() { time.Sleep(200 * time.Millisecond); os.WriteFile(stop, nil, 0o644) }()
	sum := runLoop(context.Background(), loopOptions{addr: tcp, timeout: time.Second, interval: 5 * time.Millisecond, untilFile: stop})
	if sum.OK == 0 || sum.Failed != 0 || sum.ByServer["pod-a"] != sum.OK {
		t.Fatalf("loop %+v", sum)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	sum = runLoop(ctx, loopOptions{addr: closed, timeout: time.Second, interval: 5 * time.Millisecond})
	if sum.OK != 0 || sum.Failed == 0 || sum.Errors["ECONNREFUSED"] != sum.Failed {
		t.Fatalf("loop on a closed port %+v", sum)
	}
}

// holdEvents runs `labtool hold` until the test ends; its events arrive on the channel.
func holdEvents(t *testing.T, o holdOptions) <-chan holdEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan holdEvent, 1000)
	done := make(chan struct{})
	go func() { defer close(done); events <- runHold(ctx, o, func(e holdEvent) { events <- e }) }()
	t.Cleanup(func() { cancel(); <-done })
	return events
}

// nextEvent: the first event that matches, failing the test after 10 s.
func nextEvent(t *testing.T, events <-chan holdEvent, what string, match func(holdEvent) bool) holdEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if match(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event", what)
		}
	}
}

func TestHoldUDP(t *testing.T) {
	a, err := startServers("pod-a", "", "0", "")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(a.udp.String())
	events := holdEvents(t, holdOptions{proto: "udp", addr: net.JoinHostPort("127.0.0.1", port), interval: 10 * time.Millisecond, timeout: time.Second})
	if e := nextEvent(t, events, "connected", func(e holdEvent) bool { return e.Event == "connected" }); e.Socket != 1 || e.Remote != "127.0.0.1:"+port {
		t.Fatalf("first event %+v", e)
	}
	if e := nextEvent(t, events, "reply", func(e holdEvent) bool { return e.Event != "connected" }); e.Event != "reply" || e.Server != "pod-a" || e.Socket != 1 {
		t.Fatalf("want socket 1's reply from pod-a, got %+v", e)
	}
	// The server goes: the connected socket gets the ICMP port unreachable as
	// ECONNREFUSED from the blocked read, and is replaced.
	a.Close()
	if e := nextEvent(t, events, "error", func(e holdEvent) bool { return e.Event != "reply" }); e.Event != "error" || e.Socket != 1 || e.Error != "ECONNREFUSED" {
		t.Fatalf("want socket 1's ECONNREFUSED, got %+v", e)
	}
	b, err := startServers("pod-b", "", port, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if e := nextEvent(t, events, "reply from pod-b", func(e holdEvent) bool { return e.Event == "reply" }); e.Server != "pod-b" || e.Socket < 2 {
		t.Fatalf("want a new socket's reply from pod-b, got %+v", e)
	}
}

func TestHoldTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// labtool serve's protocol (a name, then echo), each connection named by
	// its number; the test closes connection 1 from the server side.
	conns := make(chan net.Conn, 10)
	go func() {
		for i := 1; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() { io.WriteString(c, fmt.Sprintf("srv-%d\n", i)); io.Copy(c, c) }()
		}
	}()
	events := holdEvents(t, holdOptions{proto: "tcp", addr: ln.Addr().String(), interval: 10 * time.Millisecond, timeout: time.Second})
	if e := nextEvent(t, events, "reply", func(e holdEvent) bool { return e.Event != "connected" }); e.Event != "reply" || e.Server != "srv-1" || e.Socket != 1 {
		t.Fatalf("want socket 1's reply from srv-1, got %+v", e)
	}
	c1 := <-conns
	defer c1.Close()
	c1.(*net.TCPConn).CloseWrite() // the server's FIN: the reader's EOF

	if e := nextEvent(t, events, "error", func(e holdEvent) bool { return e.Event != "reply" }); e.Event != "error" || e.Socket != 1 || e.Error != "EOF" {
		t.Fatalf("want socket 1's EOF, got %+v", e)
	}
	if e := nextEvent(t, events, "reply", func(e holdEvent) bool { return e.Event == "reply" }); e.Server != "srv-2" || e.Socket != 2 {
		t.Fatalf("want socket 2's reply from srv-2, got %+v", e)
	}
}

func TestHoldFailCause(t *testing.T) {
	aborted := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNABORTED)}
	readAborted := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNABORTED)}
	noDest := &net.OpError{Op: "write", Net: "udp", Err: os.NewSyscallError("write", syscall.EDESTADDRREQ)}
	for _, c := range []struct {
		name        string
		write, read error
		want        string
	}{
		{"TCP destroyed during the write: the write has the cause, the reader EOF", aborted, io.EOF, "ECONNABORTED"},
		{"TCP destroyed while the reader waited", syscall.EPIPE, readAborted, "ECONNABORTED"},
		{"UDP destroyed: disconnected, the cause is the reader's", noDest, readAborted, "ECONNABORTED"},
		{"the server's FIN, then a write on the closed socket", syscall.EPIPE, io.EOF, "EOF"},
		{"nothing from the reader in time", aborted, nil, "ECONNABORTED"},
	} {
		if got := errorName(failCause(c.write, c.read)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestHoldTimeoutKeepsTheSocket(t *testing.T) {
	// A UDP socket that reads and never answers: timeouts, one socket.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	var events []holdEvent
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	sum := runHold(ctx, holdOptions{proto: "udp", addr: pc.LocalAddr().String(), interval: 10 * time.Millisecond, timeout: 50 * time.Millisecond}, func(e holdEvent) { events = append(events, e) })
	if sum.Sockets != 1 || sum.Timeouts == 0 || len(sum.Errors) != 0 || len(sum.Replies) != 0 {
		t.Fatalf("summary %+v, events %+v", sum, events)
	}
}

// loop --trace: each attempt with its local address, also a refused one.
func TestLoopTrace(t *testing.T) {
	s, err := startServers("pod-t", "0", "0", "0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, port, _ := net.SplitHostPort(s.tcp.String())
	sum := runLoop(ctx, loopOptions{addr: net.JoinHostPort("127.0.0.1", port), timeout: time.Second, interval: 5 * time.Millisecond, trace: &out})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	line, local, err := firstLineLocal(context.Background(), closed, time.Second)
	if line != "" || errorName(err) != "ECONNREFUSED" || !strings.HasPrefix(local, "127.0.0.1:") {
		t.Fatalf("closed port: %q %q %v", line, local, err)
	}
	var attempts []attempt
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var a attempt
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("trace line %q: %v", l, err)
		}
		attempts = append(attempts, a)
	}
	if sum.OK == 0 || sum.Failed != 0 || len(attempts) != sum.OK {
		t.Fatalf("loop %+v, %d attempts traced", sum, len(attempts))
	}
	for _, a := range attempts {
		if a.Server != "pod-t" || a.Error != "" || !strings.HasPrefix(a.Local, "127.0.0.1:") || a.Local == "127.0.0.1:0" || a.T == 0 {
			t.Fatalf("attempt %+v", a)
		}
	}
}
