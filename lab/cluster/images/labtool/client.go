package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

func count(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, usageError{fmt.Sprintf("COUNT must be a whole number >= 1, not %q", s)}
	}
	return n, nil
}

// firstLine connects, reads the first line the server sends, and closes.
func firstLine(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return readFirstLine(c, timeout)
}

// readFirstLine: the first line the server sends on c, within timeout.
func readFirstLine(c net.Conn, timeout time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("connection closed before the first line: %w", err)
		}
		return "", err
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// countedArgs parses the arguments tcp and udp share: HOST PORT COUNT [--timeout D].
func countedArgs(argv []string) (host, port string, n int, timeout time.Duration, err error) {
	a, err := parseArgs(argv, "timeout")
	if err != nil {
		return
	}
	if err = a.want(3, "HOST PORT COUNT"); err != nil {
		return
	}
	if n, err = count(a.pos[2]); err != nil {
		return
	}
	timeout, err = a.duration("timeout", 2*time.Second)
	return a.pos[0], a.pos[1], n, timeout, err
}

func cmdTCP(argv []string) error {
	host, port, n, timeout, err := countedArgs(argv)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(host, port)
	failed := 0
	for i := 1; i <= n; i++ {
		line, err := firstLine(context.Background(), addr, timeout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "labtool tcp: connection %d to %s: %v\n", i, addr, err)
			failed++
			continue
		}
		fmt.Println(line)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d connections to %s failed", failed, n, addr)
	}
	return nil
}

// udpExchange sends one datagram from the unconnected socket and returns the
// first line of the reply and where it came from.
func udpExchange(conn *net.UDPConn, to netip.AddrPort, payload []byte, timeout time.Duration) (string, netip.AddrPort, error) {
	if _, err := conn.WriteToUDPAddrPort(payload, to); err != nil {
		return "", netip.AddrPort{}, err
	}
	conn.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64*1024)
	n, from, err := conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		return "", netip.AddrPort{}, err
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	return line, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), nil
}

func cmdUDP(argv []string) error {
	host, port, n, timeout, err := countedArgs(argv)
	if err != nil {
		return err
	}
	raddr, err := net.ResolveUDPAddr("udp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	to := netip.AddrPortFrom(raddr.AddrPort().Addr().Unmap(), raddr.AddrPort().Port())
	// A socket of HOST's family (an IPv6 one to an IPv6 address, so that the
	// datagrams pass sendmsg6/recvmsg6). Unconnected: the kernel does not
	// filter replies by source, so a reply whose source was not translated
	// back to HOST:PORT is seen, and caught.
	network := "udp4"
	if to.Addr().Is6() {
		network = "udp6"
	}
	conn, err := net.ListenUDP(network, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	failed := 0
	for i := 1; i <= n; i++ {
		line, from, err := udpExchange(conn, to, []byte(fmt.Sprintf("labtool %d\n", i)), timeout)
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "labtool udp: datagram %d to %s: %v\n", i, to, err)
			failed++
		case from != to:
			fmt.Fprintf(os.Stderr, "labtool udp: datagram %d: the reply came from %s, not %s (source not translated back)\n", i, from, to)
			fmt.Println(line)
			failed++
		default:
			fmt.Println(line)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d datagrams to %s failed", failed, n, to)
	}
	return nil
}

func cmdDNS(argv []string) error {
	a, err := parseArgs(argv, "timeout")
	if err != nil {
		return err
	}
	if err := a.want(1, "NAME"); err != nil {
		return err
	}
	timeout, err := a.duration("timeout", 5*time.Second)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Go's own resolver (the binary has no cgo): /etc/resolv.conf's
	// nameservers, search list and ndots, as a pod's libc would use them.
	r := &net.Resolver{PreferGo: true}
	ips, err := r.LookupIP(ctx, "ip4", a.pos[0])
	if err != nil {
		return err
	}
	for _, ip := range ips {
		fmt.Println(ip)
	}
	return nil
}

func cmdHTTP(argv []string) error {
	a, err := parseArgs(argv, "timeout")
	if err != nil {
		return err
	}
	if err := a.want(1, "URL"); err != nil {
		return err
	}
	timeout, err := a.duration("timeout", 5*time.Second)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: timeout}).Get(a.pos[0])
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	os.Stdout.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		fmt.Println()
	}
	if resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", a.pos[0], resp.Status)
	}
	return nil
}
