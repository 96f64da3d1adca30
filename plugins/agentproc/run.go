package agentproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// Run runs cmd to its end in a process group of its own, with its stdout
// and stderr written to out in the order they come, and returns cmd's
// Wait error. cmd's Stdout and Stderr must be nil.
//
// Nothing cmd started outlives Run: once cmd exits, what it left in its
// group (a "sleep 100 &", a server started in the background) is stopped
// with StopGroup and grace; if ctx ends first, the whole group is
// stopped, cmd with it. A process that left the group (setsid, as a
// double-forking daemon does) escapes; it may keep the output open, which
// is then read for at most grace more.
//
// out is written by one goroutine at a time, and no more once Run
// returns.
func Run(ctx context.Context, cmd *exec.Cmd, out io.Writer, grace time.Duration) error {
	if cmd.Stdout != nil || cmd.Stderr != nil {
		return errors.New("agentproc: the command's output is already set")
	}
	// Our own pipe rather than exec's: Wait returns when cmd exits, not
	// when the last holder of its output does, so what cmd left behind
	// can be stopped at once.
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("agentproc: a pipe for the output: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	SetProcessGroup(cmd)
	err = cmd.Start()
	w.Close() // the child has its own copy; ours would keep the pipe open
	if err != nil {
		r.Close()
		return err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, r)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	select {
	case err = <-waited:
		StopGroup(cmd.Process, grace)
	case <-ctx.Done():
		// Wait goes on meanwhile, so cmd is reaped as soon as it ends
		// and the group can be seen empty.
		StopGroup(cmd.Process, grace)
		err = <-waited
	}

	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-copied:
	case <-timer.C:
	}
	r.Close() // ends the copy if an escaped process holds the output
	<-copied
	return err
}
