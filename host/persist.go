package host

// StoreWriteErrors returns how many writes to the session store (records
// written or removed, and the root config) have failed since the host
// started.
func (h *Host) StoreWriteErrors() uint64 { return h.storeErrors.Load() }

// removeRecord drops a session's record, after any write of it under way.
func (h *Host) removeRecord(id string) error {
	return h.writer.removeNow(id)
}
