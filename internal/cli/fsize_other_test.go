//go:build !unix

package cli

import "errors"

// limitFileSize has no file-size limit to set outside unix.
func limitFileSize(limit string) error {
	if limit == "" {
		return nil
	}
	return errors.New("no RLIMIT_FSIZE on this system")
}
