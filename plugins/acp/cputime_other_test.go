//go:build !unix

package acp_test

import "time"

// cpuTime is not measured here: the benchmark reports 0 CPU a chunk.
func cpuTime() time.Duration { return 0 }
