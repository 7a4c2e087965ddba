//go:build unix

package storage

import "syscall"

// umask is the process umask, read once at start-up (Umask can only be read by setting it).
var umask = func() uint32 {
	m := syscall.Umask(0o022)
	syscall.Umask(m)
	return uint32(m)
}()
