//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startCommand runs the densitykv main in a child process and waits until
// its command is running.
func startCommand(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Env = append(os.Environ(), envTestMain+"=1")
	var stderr syncBuffer
	c.Stderr = &stderr
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child did not start: %q %v; stderr %q", line, err, stderr.String())
	}
	return c, &stderr
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func waitExit(t *testing.T, c *exec.Cmd) syscall.WaitStatus {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return c.ProcessState.Sys().(syscall.WaitStatus)
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not end within 10 s")
	}
	return 0
}

// Real signals: the first Ctrl-C stops a command with exit 130 and the
// notice; a second Ctrl-C kills a command still busy at once.
func TestCtrlCSignals(t *testing.T) {
	if signal.Ignored(os.Interrupt) {
		t.Skip("SIGINT is ignored in this process (inherited): a child cannot be killed by it")
	}
	const notice = "densitykv: Ctrl-C: stopping the test wait (Ctrl-C again to abort)"
	t.Run("once", func(t *testing.T) {
		c, stderr := startCommand(t, "test-wait")
		if err := c.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		ws := waitExit(t, c)
		if ws.ExitStatus() != exitInterrupted || !strings.Contains(stderr.String(), notice) {
			t.Fatalf("exit %d, want %d; stderr %q", ws.ExitStatus(), exitInterrupted, stderr.String())
		}
	})
	t.Run("twice", func(t *testing.T) {
		c, stderr := startCommand(t, "test-wait", "--ignore-ctrl-c")
		if err := c.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the Ctrl-C notice", func() bool { return strings.Contains(stderr.String(), notice) })
		if err := c.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if ws := waitExit(t, c); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Fatalf("after a second Ctrl-C: %v, want killed by SIGINT; stderr %q", c.ProcessState, stderr.String())
		}
	})
}
