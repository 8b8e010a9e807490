package bundle

// SetJournalFile puts f in place of j's file, for a test's failing one.
func SetJournalFile(j *Journal, f interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
}) {
	j.mu.Lock()
	j.f = f
	j.mu.Unlock()
}
