// The parts that need no cluster, over loopback (test/cluster/images.test.ts
// runs this in a network namespace of its own).
package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
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
