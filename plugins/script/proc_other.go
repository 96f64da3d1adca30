//go:build !unix

package script

import "os/exec"

// killGroupOnCancel leaves cmd as it is: without process groups only the
// shell itself is killed when cmd's context ends.
func killGroupOnCancel(cmd *exec.Cmd) {}
