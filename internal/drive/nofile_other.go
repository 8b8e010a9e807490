//go:build !unix

package drive

// openFileLimit is not known on this platform: no plan is refused for it.
func openFileLimit() (uint64, bool) { return 0, false }
