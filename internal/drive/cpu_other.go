//go:build !unix

package drive

import "time"

// cpuTime is not measured on this platform; waves report 0.
func cpuTime() time.Duration { return 0 }
