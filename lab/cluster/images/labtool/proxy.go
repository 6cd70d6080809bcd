package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// soOriginalDst: SO_ORIGINAL_DST (linux/netfilter_ipv4.h) and
// IP6T_SO_ORIGINAL_DST (linux/netfilter_ipv6/ip6_tables.h), both 80: the
// destination a connection had before the nat table's REDIRECT.
const soOriginalDst = 80

// originalDst reads the address a redirected connection was sent to, as a
// sidecar proxy (Envoy, linkerd2-proxy) does. sockaddr_in (16 bytes) fits in
// IPv6Mreq's 20, sockaddr_in6 (28) in IPv6MTUInfo's 32: the standard
// library's getsockopt wrappers of those sizes carry them.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	local := c.LocalAddr().(*net.TCPAddr)
	var out netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		if local.IP.To4() != nil {
			m, e := syscall.GetsockoptIPv6Mreq(int(fd), syscall.SOL_IP, soOriginalDst)
			if e != nil {
				serr = e
				return
			}
			b := m.Multiaddr[:]
			addr := netip.AddrFrom4([4]byte(b[4:8]))
			out = netip.AddrPortFrom(addr, binary.BigEndian.Uint16(b[2:4]))
			return
		}
		info, e := syscall.GetsockoptIPv6MTUInfo(int(fd), syscall.SOL_IPV6, soOriginalDst)
		if e != nil {
			serr = e
			return
		}
		port := info.Addr.Port
		// RawSockaddrInet6.Port holds the bytes in network order.
		p := [2]byte{}
		binary.NativeEndian.PutUint16(p[:], port)
		out = netip.AddrPortFrom(netip.AddrFrom16(info.Addr.Addr), binary.BigEndian.Uint16(p[:]))
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	return out, serr
}

// proxyLine: what the proxy tells the client first, and logs, per connection.
type proxyLine struct {
	Orig    string `json:"orig"`
	Backend string `json:"backend,omitempty"`
	Error   string `json:"error,omitempty"`
}

var proxyLog sync.Mutex

func (l proxyLine) text() string {
	b, _ := json.Marshal(l)
	return string(b)
}

// proxyConn: the original destination, the onward connection to it (the
// proxy's own socket, left alone by the pod's REDIRECT rule by its uid), the
// backend's first line; then a line to the client, then both ways.
func proxyConn(c *net.TCPConn, timeout time.Duration) {
	defer c.Close()
	l := proxyLine{}
	orig, err := originalDst(c)
	var onward net.Conn
	var backendReader *bufio.Reader
	if err != nil {
		l.Error = fmt.Sprintf("SO_ORIGINAL_DST: %v", err)
	} else if orig.String() == c.LocalAddr().String() || orig.Port() == uint16(c.LocalAddr().(*net.TCPAddr).Port) {
		// Not redirected (a probe to the proxy's own port): dialing it would
		// connect to the proxy again, and again, until it runs out of files.
		l.Orig = orig.String()
		l.Error = "not redirected: the destination is the proxy itself"
	} else {
		l.Orig = orig.String()
		onward, err = net.DialTimeout("tcp", l.Orig, timeout)
		if err == nil {
			onward.SetReadDeadline(time.Now().Add(timeout))
			backendReader = bufio.NewReader(onward)
			var name string
			name, err = backendReader.ReadString('\n')
			l.Backend = strings.TrimSpace(name)
			onward.SetReadDeadline(time.Time{})
		}
		if err != nil {
			l.Error = err.Error()
		}
	}
	proxyLog.Lock()
	fmt.Println(l.text())
	proxyLog.Unlock()
	if _, err := io.WriteString(c, l.text()+"\n"); err != nil || l.Error != "" {
		if onward != nil {
			onward.Close()
		}
		return
	}
	defer onward.Close()
	go func() {
		io.Copy(onward, c)
		onward.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, backendReader)
}

// cmdProxy: a sidecar proxy's shape, for the mesh check: the pod's
// iptables REDIRECT sends its outgoing TCP here.
func cmdProxy(argv []string) error {
	a, err := parseArgs(argv, "port", "timeout")
	if err != nil {
		return err
	}
	if err := a.want(0, "no arguments"); err != nil {
		return err
	}
	timeout, err := a.duration("timeout", 5*time.Second)
	if err != nil {
		return err
	}
	port := a.flags["port"]
	if port == "" {
		port = "15001"
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "labtool proxy: %s (uid %d)\n", ln.Addr(), os.Getuid())
	for {
		c, err := ln.Accept()
		if err != nil {
			// Out of files for a moment (EMFILE): the listener stays.
			fmt.Fprintf(os.Stderr, "labtool proxy: accept: %v\n", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go proxyConn(c.(*net.TCPConn), timeout)
	}
}
