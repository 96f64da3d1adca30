package claude

// DenyMessage is what the CLI is told when the user refuses a call.
const DenyMessage = denyMessage

// PID returns the process id of the CLI a runs, or 0 when none runs.
func PID(a *Agent) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc == nil {
		return 0
	}
	return a.proc.PID()
}

// WriteRaw writes line to the stdin of the CLI a runs, as it is.
func WriteRaw(a *Agent, line string) error {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	_, err := p.Stdin().WriteString(line + "\n")
	return err
}

// TranscriptPath returns where the CLI keeps a's conversation.
func TranscriptPath(a *Agent) string { return a.transcript }
