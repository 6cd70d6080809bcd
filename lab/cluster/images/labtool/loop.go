package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// summary: what `labtool loop` prints at the end (one JSON line).
type summary struct {
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	// By cause: an errno name (ECONNREFUSED, ...), "timeout" or "EOF".
	Errors map[string]int `json:"errors"`
	// By the first line the server sent (the pod's name).
	ByServer map[string]int `json:"byServer"`
}

var errnoNames = map[syscall.Errno]string{
	syscall.ECONNREFUSED:  "ECONNREFUSED",
	syscall.ECONNRESET:    "ECONNRESET",
	syscall.ECONNABORTED:  "ECONNABORTED",
	syscall.ETIMEDOUT:     "ETIMEDOUT",
	syscall.EHOSTUNREACH:  "EHOSTUNREACH",
	syscall.ENETUNREACH:   "ENETUNREACH",
	syscall.EPIPE:         "EPIPE",
	syscall.EADDRNOTAVAIL: "EADDRNOTAVAIL",
	syscall.EDESTADDRREQ:  "EDESTADDRREQ",
	syscall.EPERM:         "EPERM",
	syscall.EACCES:        "EACCES",
}

// errorName: a short, bounded name for a failed attempt (the summary counts by it).
func errorName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if n, ok := errnoNames[errno]; ok {
			return n
		}
		return fmt.Sprintf("errno %d", int(errno))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	if errors.Is(err, io.EOF) {
		return "EOF"
	}
	return "other"
}

type loopOptions struct {
	addr      string
	timeout   time.Duration
	interval  time.Duration
	untilFile string
	// With --trace: each attempt, a JSON line (see attempt) here.
	trace io.Writer
}

// runLoop connects until ctx ends or untilFile exists. An attempt cut short
// by the end of ctx is not counted: it says nothing about the service.
func runLoop(ctx context.Context, o loopOptions) summary {
	s := summary{Errors: map[string]int{}, ByServer: map[string]int{}}
	for ctx.Err() == nil {
		if o.untilFile != "" {
			if _, err := os.Stat(o.untilFile); err == nil {
				break
			}
		}
		start := time.Now()
		var line, local string
		var err error
		if o.trace != nil {
			line, local, err = firstLineLocal(ctx, o.addr, o.timeout)
		} else {
			line, err = firstLine(ctx, o.addr, o.timeout)
		}
		if ended(ctx) {
			break
		}
		if err != nil {
			s.Failed++
			s.Errors[errorName(err)]++
		} else {
			s.OK++
			s.ByServer[line]++
		}
		if o.trace != nil {
			traceAttempt(o.trace, start, local, line, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.interval):
		}
	}
	return s
}

// ended: ctx is done or its deadline has passed. The dialer checks the
// deadline itself, so an attempt begun at the very end fails with a timeout
// a moment before ctx.Err() says so; that attempt was cut short too.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func cmdLoop(argv []string) error {
	a, err := parseArgs(argv, "duration", "until-file", "interval", "timeout", "trace")
	if err != nil {
		return err
	}
	if err := a.want(2, "HOST PORT"); err != nil {
		return err
	}
	_, hasDuration := a.flags["duration"]
	untilFile := a.flags["until-file"]
	if hasDuration == (untilFile != "") {
		return usageError{"give one of --duration or --until-file"}
	}
	o := loopOptions{addr: net.JoinHostPort(a.pos[0], a.pos[1]), untilFile: untilFile}
	switch a.flags["trace"] {
	case "", "off":
	case "stderr":
		o.trace = os.Stderr
	default:
		return usageError{"--trace takes stderr or off"}
	}
	if o.interval, err = a.duration("interval", 10*time.Millisecond); err != nil {
		return err
	}
	if o.timeout, err = a.duration("timeout", 2*time.Second); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if hasDuration {
		d, err := a.duration("duration", 0)
		if err != nil {
			return err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	s := runLoop(ctx, o)
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
	if s.Failed > 0 {
		return fmt.Errorf("%d of %d connections to %s failed", s.Failed, s.OK+s.Failed, o.addr)
	}
	return nil
}
