package protocol

import "slices"

// The reducers of the terminal, changeset and annotations channels.

// ReduceTerminal applies a terminal-channel action.
func ReduceTerminal(s *TerminalState, a Action) *TerminalState {
	next := *s
	switch a := a.(type) {
	case *TerminalDataAction:
		next.Content = terminalData(s.Content, a.Data)
	case *TerminalInputAction:
		return s // input goes to the process; the output comes back as data
	case *TerminalResizedAction:
		next.Cols, next.Rows = new(a.Cols), new(a.Rows)
	case *TerminalClaimedAction:
		next.Claim = a.Claim
	case *TerminalTitleChangedAction:
		next.Title = a.Title
	case *TerminalCwdChangedAction:
		next.Cwd = new(a.Cwd)
	case *TerminalExitedAction:
		next.Lifecycle = &TerminalExitedLifecycleState{ExitCode: a.ExitCode}
	case *TerminalClearedAction:
		next.Content = []TerminalContentPart{}
	case *TerminalCommandDetectionAvailableAction:
		next.SupportsCommandDetection = new(true)
	case *TerminalCommandExecutedAction:
		next.Content = append(slices.Clip(s.Content), &TerminalCommandPart{
			CommandID:   a.CommandID,
			CommandLine: a.CommandLine,
			Timestamp:   a.Timestamp,
		})
		next.SupportsCommandDetection = new(true)
	case *TerminalCommandFinishedAction:
		next.Content = slices.Clone(s.Content)
		for i, p := range next.Content {
			if c, ok := p.(*TerminalCommandPart); ok && c.CommandID == a.CommandID {
				done := *c
				done.IsComplete, done.ExitCode, done.DurationMs = true, a.ExitCode, a.DurationMs
				next.Content[i] = &done
			}
		}
	default:
		return s
	}
	return &next
}

// terminalData appends output to the running command, else to the
// unclassified text at the end, else as new unclassified text.
func terminalData(content []TerminalContentPart, data string) []TerminalContentPart {
	out := slices.Clone(content)
	if n := len(out); n > 0 {
		switch tail := out[n-1].(type) {
		case *TerminalCommandPart:
			if !tail.IsComplete {
				next := *tail
				next.Output += data
				out[n-1] = &next
				return out
			}
		case *TerminalUnclassifiedPart:
			next := *tail
			next.Value += data
			out[n-1] = &next
			return out
		}
	}
	return append(out, &TerminalUnclassifiedPart{Value: data})
}

// ReduceChangeset applies a changeset-channel action.
func ReduceChangeset(s *ChangesetState, a Action) *ChangesetState {
	next := *s
	switch a := a.(type) {
	case *ChangesetStatusChangedAction:
		// An error belongs to the error status only; a recovered changeset
		// must not keep a stale one.
		next.Status, next.Error = a.Status, nil
		if a.Status == ChangesetStatusError {
			next.Error = a.Error
		}
	case *ChangesetFileSetAction:
		next.Files = upsert(s.Files, a.File, func(f ChangesetFile) bool { return f.ID == a.File.ID })
	case *ChangesetFileRemovedAction:
		i := slices.IndexFunc(s.Files, func(f ChangesetFile) bool { return f.ID == a.FileID })
		if i < 0 {
			return s
		}
		next.Files = without(s.Files, i)
	case *ChangesetFilesReviewChangedAction:
		changed := false
		files := slices.Clone(s.Files)
		for i, f := range files {
			if slices.Contains(a.Files, f.ID) && (f.Reviewed == nil || *f.Reviewed != a.Reviewed) {
				files[i].Reviewed = new(a.Reviewed)
				changed = true
			}
		}
		if !changed {
			return s
		}
		next.Files = files
	case *ChangesetContentChangedAction:
		next.Files = a.Files
		if a.Operations != nil {
			next.Operations = a.Operations
		}
	case *ChangesetOperationsChangedAction:
		next.Operations = a.Operations
	case *ChangesetOperationStatusChangedAction:
		i := slices.IndexFunc(s.Operations, func(o ChangesetOperation) bool { return o.ID == a.OperationID })
		if i < 0 {
			return s
		}
		next.Operations = slices.Clone(s.Operations)
		op := &next.Operations[i]
		op.Status, op.Error = a.Status, nil
		if a.Status == ChangesetOperationStatusError {
			op.Error = a.Error
		}
	case *ChangesetClearedAction:
		if len(s.Files) == 0 {
			return s
		}
		next.Files = []ChangesetFile{}
	default:
		return s
	}
	return &next
}

// ReduceAnnotations applies an annotations-channel action. Annotations and
// their entries keep the order they were added in; an action naming an
// unknown annotation or entry changes nothing.
func ReduceAnnotations(s *AnnotationsState, a Action) *AnnotationsState {
	next := *s
	switch a := a.(type) {
	case *AnnotationsSetAction:
		next.Annotations = upsert(s.Annotations, a.Annotation, func(t Annotation) bool { return t.ID == a.Annotation.ID })
	case *AnnotationsUpdatedAction:
		i := slices.IndexFunc(s.Annotations, func(t Annotation) bool { return t.ID == a.AnnotationID })
		if i < 0 {
			return s
		}
		next.Annotations = slices.Clone(s.Annotations)
		t := &next.Annotations[i]
		if a.Origin != nil {
			t.Origin = *a.Origin
		}
		if a.Resource != nil {
			t.Resource = *a.Resource
		}
		if a.Range != nil {
			t.Range = a.Range
		}
		if a.Resolved != nil {
			t.Resolved = *a.Resolved
		}
	case *AnnotationsRemovedAction:
		i := slices.IndexFunc(s.Annotations, func(t Annotation) bool { return t.ID == a.AnnotationID })
		if i < 0 {
			return s
		}
		next.Annotations = without(s.Annotations, i)
	case *AnnotationsEntrySetAction:
		i := slices.IndexFunc(s.Annotations, func(t Annotation) bool { return t.ID == a.AnnotationID })
		if i < 0 {
			return s
		}
		next.Annotations = slices.Clone(s.Annotations)
		t := &next.Annotations[i]
		t.Entries = upsert(t.Entries, a.Entry, func(e AnnotationEntry) bool { return e.ID == a.Entry.ID })
	case *AnnotationsEntryRemovedAction:
		i := slices.IndexFunc(s.Annotations, func(t Annotation) bool { return t.ID == a.AnnotationID })
		if i < 0 {
			return s
		}
		j := slices.IndexFunc(s.Annotations[i].Entries, func(e AnnotationEntry) bool { return e.ID == a.EntryID })
		if j < 0 {
			return s
		}
		next.Annotations = slices.Clone(s.Annotations)
		next.Annotations[i].Entries = without(s.Annotations[i].Entries, j)
	default:
		return s
	}
	return &next
}
