package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// attempt: one connection of `labtool loop --trace` (a JSON line on stderr):
// when it began, the local address the kernel gave it, and what it got. The
// local address is known right after connect(), so an attempt that times out
// has one too: a failure can be matched with the flows that used its port.
type attempt struct {
	T      int64  `json:"t"`
	Local  string `json:"local"`
	Server string `json:"server,omitempty"`
	Error  string `json:"error,omitempty"`
}

// traceAttempt writes one attempt (begun at start, from local) to w.
func traceAttempt(w io.Writer, start time.Time, local, line string, err error) {
	a := attempt{T: start.UnixMilli(), Local: local, Server: line}
	if err != nil {
		a.Error = errorName(err)
	}
	b, _ := json.Marshal(a)
	fmt.Fprintln(w, string(b))
}

// firstLineLocal connects a non-blocking socket itself (so that its local
// address can be read while the handshake is still under way), then reads the
// first line as firstLine does. Returns the line and the local address.
func firstLineLocal(ctx context.Context, addr string, timeout time.Duration) (string, string, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return "", "", err
	}
	family, sa := syscall.AF_INET, syscall.Sockaddr(nil)
	if ip4 := ta.IP.To4(); ip4 != nil {
		s := &syscall.SockaddrInet4{Port: ta.Port}
		copy(s.Addr[:], ip4)
		sa = s
	} else {
		s := &syscall.SockaddrInet6{Port: ta.Port}
		copy(s.Addr[:], ta.IP.To16())
		family, sa = syscall.AF_INET6, s
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", "", os.NewSyscallError("socket", err)
	}
	err = syscall.Connect(fd, sa)
	local := localAddr(fd)
	if err != nil && !errors.Is(err, syscall.EINPROGRESS) {
		syscall.Close(fd)
		return "", local, os.NewSyscallError("connect", err)
	}
	f := os.NewFile(uintptr(fd), "connect")
	nc, err := net.FileConn(f) // a dup of fd, on Go's poller
	f.Close()
	if err != nil {
		return "", local, err
	}
	defer nc.Close()
	if err := awaitConnect(ctx, nc, timeout); err != nil {
		return "", local, err
	}
	line, err := readFirstLine(nc, timeout)
	return line, local, err
}

func localAddr(fd int) string {
	switch a := must(syscall.Getsockname(fd)).(type) {
	case *syscall.SockaddrInet4:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), fmt.Sprint(a.Port))
	case *syscall.SockaddrInet6:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), fmt.Sprint(a.Port))
	}
	return ""
}

func must(sa syscall.Sockaddr, err error) syscall.Sockaddr {
	if err != nil {
		return nil
	}
	return sa
}

// awaitConnect waits until the handshake of nc's socket ends (writable), at
// most timeout or until ctx ends: nil once connected, else why not.
func awaitConnect(ctx context.Context, nc net.Conn, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetWriteDeadline(deadline)
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	var soErr error
	werr := rc.Write(func(fd uintptr) bool {
		n, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ERROR)
		switch {
		case err != nil:
			soErr = os.NewSyscallError("getsockopt", err)
		case n != 0:
			soErr = os.NewSyscallError("connect", syscall.Errno(n))
		default:
			if _, err := syscall.Getpeername(int(fd)); err != nil {
				return false // still connecting: wait until writable
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return soErr
}
