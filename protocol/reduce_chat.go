package protocol

import (
	"slices"
	"time"
)

// ReduceChat applies a chat-channel action. Like every reducer since 0.9
// it reads no clock: a chat's modifiedAt is its latest turn's start when a
// turn starts, and that start plus the turn's duration when it ends.
func ReduceChat(s *ChatState, a Action) *ChatState {
	switch a := a.(type) {
	case *ChatTurnStartedAction:
		return turnStarted(s, a)
	case *ChatDeltaAction:
		return updatePart(s, a.TurnID, a.PartID, func(p ResponsePart) ResponsePart {
			if md, ok := p.(*MarkdownResponsePart); ok {
				next := *md
				next.Content, next.contentBuf = appendText(md.Content, md.contentBuf, a.Content)
				return &next
			}
			return p
		})
	case *ChatReasoningAction:
		return updatePart(s, a.TurnID, a.PartID, func(p ResponsePart) ResponsePart {
			if r, ok := p.(*ReasoningResponsePart); ok {
				next := *r
				next.Content, next.contentBuf = appendText(r.Content, r.contentBuf, a.Content)
				return &next
			}
			return p
		})
	case *ChatResponsePartAction:
		if _, ok := a.Part.(*ErrorResponsePart); ok {
			return s // an error part comes only with chat/error, which ends the turn
		}
		return withParts(s, a.TurnID, func(parts []ResponsePart) []ResponsePart {
			return append(slices.Clip(parts), a.Part)
		})
	case *ChatTurnCompleteAction:
		return endTurn(s, a.TurnID, TurnStateComplete, a.Duration, 0, nil)
	case *ChatTurnCancelledAction:
		return endTurn(s, a.TurnID, TurnStateCancelled, a.Duration, 0, nil)
	case *ChatErrorAction:
		return endTurn(s, a.TurnID, TurnStateError, a.Duration, StatusError, &a.Part)
	case *ChatTurnResumeAction:
		return turnResumed(s, a)
	case *ChatIsReadChangedAction:
		return withStatusFlag(s, StatusIsRead, a.IsRead)
	case *ChatIsArchivedChangedAction:
		return withStatusFlag(s, StatusIsArchived, a.IsArchived)
	case *ChatMovableChangedAction:
		if a.Movable == (s.Movable != nil && *s.Movable) && s.Movable != nil {
			return s
		}
		next := *s
		next.Movable = new(a.Movable)
		return &next
	case *ChatBackgroundWorkSetAction:
		return backgroundWorkSet(s, a)
	case *ChatBackgroundWorkRemovedAction:
		return backgroundWorkRemoved(s, a)
	case *ChatChangesetsChangedAction:
		next := *s
		next.Changesets = a.Changesets
		return &next
	case *ChatCanvasesChangedAction:
		next := *s
		next.Canvases = a.Canvases
		return &next
	case *ChatUsageAction:
		if s.ActiveTurn == nil || s.ActiveTurn.ID != a.TurnID {
			return s
		}
		turn := *s.ActiveTurn
		turn.Usage = &a.Usage
		next := *s
		next.ActiveTurn = &turn
		return &next
	case *ChatActivityChangedAction:
		if sameString(s.Activity, a.Activity) {
			return s
		}
		next := *s
		next.Activity = a.Activity
		return &next
	case *ChatWorkingDirectorySetAction:
		dirs, changed := withDirectory(s.WorkingDirectories, a.Directory)
		if !changed {
			return s
		}
		next := *s
		next.WorkingDirectories = dirs
		return &next
	case *ChatWorkingDirectoryRemovedAction:
		dirs, changed := withoutDirectory(s.WorkingDirectories, a.Directory)
		if !changed {
			return s
		}
		next := *s
		next.WorkingDirectories = dirs
		return &next
	case *ChatToolCallStartAction, *ChatToolCallDeltaAction, *ChatToolCallReadyAction,
		*ChatToolCallConfirmedAction, *ChatToolCallCompleteAction, *ChatToolCallResultConfirmedAction,
		*ChatToolCallContentChangedAction, *ChatToolCallAuthRequiredAction, *ChatToolCallAuthResolvedAction:
		return reduceToolCall(s, a)
	case *ChatTruncatedAction:
		return truncated(s, a)
	case *ChatTurnsLoadedAction:
		return turnsLoaded(s, a)
	case *ChatInputRequestedAction:
		return inputRequested(s, a)
	case *ChatInputAnswerChangedAction:
		return inputAnswerChanged(s, a)
	case *ChatInputCompletedAction:
		return inputCompleted(s, a)
	case *ChatPendingMessageSetAction:
		return pendingMessageSet(s, a)
	case *ChatPendingMessageRemovedAction:
		return pendingMessageRemoved(s, a)
	case *ChatQueuedMessagesReorderedAction:
		return queuedMessagesReordered(s, a)
	case *ChatDraftChangedAction:
		// Clients sync drafts as people type; an unchanged draft must not
		// cost every subscriber a message.
		if sameValue(s.Draft, a.Draft) {
			return s
		}
		next := *s
		next.Draft = a.Draft
		return &next
	}
	return s
}

func turnStarted(s *ChatState, a *ChatTurnStartedAction) *ChatState {
	next := *s
	next.ActiveTurn = &ActiveTurn{
		ID:            a.TurnID,
		StartedAt:     a.StartedAt,
		Message:       a.Message,
		ResponseParts: []ResponsePart{},
	}
	next.Status = chatStatus(&next, 0).With(StatusIsRead, false)
	next.ModifiedAt = a.StartedAt
	// A turn started from a pending message consumes it.
	if id := a.QueuedMessageID; id != nil {
		if next.SteeringMessage != nil && next.SteeringMessage.ID == *id {
			next.SteeringMessage = nil
		}
		if next.QueuedMessages != nil {
			kept := slices.DeleteFunc(slices.Clone(next.QueuedMessages), func(m PendingMessage) bool { return m.ID == *id })
			if len(kept) == 0 {
				kept = nil
			}
			next.QueuedMessages = kept
		}
	}
	return &next
}

// endTurn moves the active turn into the finished turns. Tool calls still
// open are cancelled as skipped: a finished turn runs nothing. An error
// turn ends with its error part.
func endTurn(s *ChatState, turnID string, state TurnState, duration int64, terminal SessionStatus, errPart *ErrorResponsePart) *ChatState {
	active := s.ActiveTurn
	if active == nil || active.ID != turnID {
		return s
	}
	parts := make([]ResponsePart, len(active.ResponseParts), len(active.ResponseParts)+1)
	for i, p := range active.ResponseParts {
		parts[i] = p
		tp, ok := p.(*ToolCallResponsePart)
		if !ok {
			continue
		}
		if cancelled := skipToolCall(tp.ToolCall); cancelled != nil {
			parts[i] = &ToolCallResponsePart{ToolCall: cancelled}
		}
	}
	if errPart != nil {
		parts = append(parts, errPart)
	}
	turn := Turn{
		ID:            active.ID,
		StartedAt:     new(active.StartedAt),
		Duration:      new(max(0, duration)),
		Message:       active.Message,
		ResponseParts: parts,
		Usage:         active.Usage,
		State:         state,
	}
	next := *s
	// The finished turns are shared with earlier states; appending must
	// not write into an array another state can see.
	next.Turns = append(slices.Clip(s.Turns), turn)
	next.ActiveTurn = nil
	if end, ok := afterMillis(active.StartedAt, *turn.Duration); ok {
		next.ModifiedAt = end
	}
	next.Status = chatStatus(&next, terminal)
	return &next
}

// afterMillis returns the timestamp ms milliseconds after start, written as
// AHP writes timestamps; false when start is not a timestamp.
func afterMillis(start string, ms int64) (string, bool) {
	t, err := time.Parse(time.RFC3339Nano, start)
	if err != nil {
		return "", false
	}
	return FormatTime(t.Add(time.Duration(ms) * time.Millisecond)), true
}

// turnResumed reopens the latest turn when it stopped at a resumable
// error, with its message, parts and usage as they were. The turn keeps
// its start: its duration, when it ends again, is the producer's to say.
func turnResumed(s *ChatState, a *ChatTurnResumeAction) *ChatState {
	if !Resumable(s, a.TurnID) {
		return s
	}
	last := s.Turns[len(s.Turns)-1]
	next := *s
	next.Turns = slices.Clip(s.Turns[:len(s.Turns)-1])
	startedAt := s.ModifiedAt // a turn recorded before startedAt was kept
	if last.StartedAt != nil {
		startedAt = *last.StartedAt
	}
	next.ActiveTurn = &ActiveTurn{
		ID:            last.ID,
		StartedAt:     startedAt,
		Message:       last.Message,
		ResponseParts: slices.Clip(last.ResponseParts),
		Usage:         last.Usage,
	}
	next.Status = chatStatus(&next, 0).With(StatusIsRead, false)
	return &next
}

// Resumable reports whether chat/turnResume may reopen turnID in s: no turn
// is running, and turnID is the latest turn, stopped at an error whose part
// says it can be resumed.
func Resumable(s *ChatState, turnID string) bool {
	if s.ActiveTurn != nil || len(s.Turns) == 0 {
		return false
	}
	last := s.Turns[len(s.Turns)-1]
	if last.ID != turnID || last.State != TurnStateError || len(last.ResponseParts) == 0 {
		return false
	}
	e, ok := last.ResponseParts[len(last.ResponseParts)-1].(*ErrorResponsePart)
	return ok && e.Resumable != nil && *e.Resumable
}

// withStatusFlag sets or clears one of the flag bits of a chat's status.
func withStatusFlag(s *ChatState, flag SessionStatus, on bool) *ChatState {
	status := s.Status.With(flag, on)
	if status == s.Status {
		return s
	}
	next := *s
	next.Status = status
	return &next
}

func backgroundWorkSet(s *ChatState, a *ChatBackgroundWorkSetAction) *ChatState {
	id := backgroundWorkID(a.Work)
	next := *s
	next.BackgroundWork = upsert(s.BackgroundWork, a.Work, func(w BackgroundWork) bool { return backgroundWorkID(w) == id })
	return &next
}

func backgroundWorkRemoved(s *ChatState, a *ChatBackgroundWorkRemovedAction) *ChatState {
	i := slices.IndexFunc(s.BackgroundWork, func(w BackgroundWork) bool { return backgroundWorkID(w) == a.ID })
	if i < 0 {
		return s
	}
	next := *s
	next.BackgroundWork = without(s.BackgroundWork, i)
	if len(next.BackgroundWork) == 0 {
		next.BackgroundWork = nil
	}
	return &next
}

// chatStatus derives a chat's status from what is in hand, keeping the
// flag bits. A non-zero terminal status (Error) wins.
func chatStatus(s *ChatState, terminal SessionStatus) SessionStatus {
	var activity SessionStatus
	switch {
	case terminal != 0:
		activity = terminal
	case hasOpenInputRequest(s) || hasBlockingToolCall(s):
		activity = StatusInputNeeded
	case s.ActiveTurn != nil:
		activity = StatusInProgress
	default:
		activity = StatusIdle
	}
	return s.Status.WithActivity(activity)
}

// refreshStatus recomputes the status after a tool call moved.
func refreshStatus(s *ChatState) *ChatState {
	status := chatStatus(s, 0)
	if status == s.Status {
		return s
	}
	next := *s
	next.Status = status
	return &next
}

// hasBlockingToolCall reports whether a tool call of the active turn waits
// on somebody: a confirmation, a result confirmation, or authentication.
func hasBlockingToolCall(s *ChatState) bool {
	if s.ActiveTurn == nil {
		return false
	}
	for _, p := range s.ActiveTurn.ResponseParts {
		if tp, ok := p.(*ToolCallResponsePart); ok {
			switch tp.ToolCall.(type) {
			case *ToolCallPendingConfirmationState, *ToolCallPendingResultConfirmationState, *ToolCallAuthRequiredState:
				return true
			}
		}
	}
	return false
}

func hasOpenInputRequest(s *ChatState) bool {
	if s.ActiveTurn == nil {
		return false
	}
	for _, p := range s.ActiveTurn.ResponseParts {
		if ir, ok := p.(*InputRequestResponsePart); ok && ir.Response == nil {
			return true
		}
	}
	return false
}

// withParts replaces the active turn's parts when turnID names it.
func withParts(s *ChatState, turnID string, update func([]ResponsePart) []ResponsePart) *ChatState {
	if s.ActiveTurn == nil || s.ActiveTurn.ID != turnID {
		return s
	}
	turn := *s.ActiveTurn
	turn.ResponseParts = update(turn.ResponseParts)
	next := *s
	next.ActiveTurn = &turn
	return &next
}

// updatePart applies update to the first part of the active turn whose id
// (a tool call's toolCallId) is partID.
func updatePart(s *ChatState, turnID, partID string, update func(ResponsePart) ResponsePart) *ChatState {
	if s.ActiveTurn == nil || s.ActiveTurn.ID != turnID {
		return s
	}
	for i, p := range s.ActiveTurn.ResponseParts {
		if partIdentity(p) != partID {
			continue
		}
		updated := update(p)
		if updated == p {
			return s
		}
		return withParts(s, turnID, func(parts []ResponsePart) []ResponsePart {
			out := slices.Clone(parts)
			out[i] = updated
			return out
		})
	}
	return s
}

func partIdentity(p ResponsePart) string {
	switch p := p.(type) {
	case *MarkdownResponsePart:
		return p.ID
	case *ReasoningResponsePart:
		return p.ID
	case *ToolCallResponsePart:
		return toolCallID(p.ToolCall)
	}
	return "\x00" // matches no id
}

func truncated(s *ChatState, a *ChatTruncatedAction) *ChatState {
	next := *s
	if a.TurnID == nil {
		next.Turns = []Turn{}
		next.TurnsNextCursor = nil
	} else {
		i := slices.IndexFunc(s.Turns, func(t Turn) bool { return t.ID == *a.TurnID })
		if i < 0 {
			return s
		}
		next.Turns = slices.Clip(s.Turns[:i+1])
	}
	next.ActiveTurn = nil
	next.Status = chatStatus(&next, 0)
	return &next
}

// turnsLoaded puts older turns, fetched page by page, before the ones held.
func turnsLoaded(s *ChatState, a *ChatTurnsLoadedAction) *ChatState {
	held := make(map[string]bool, len(s.Turns))
	for _, t := range s.Turns {
		held[t.ID] = true
	}
	turns := make([]Turn, 0, len(a.Turns)+len(s.Turns))
	for _, t := range a.Turns {
		if !held[t.ID] {
			turns = append(turns, t)
		}
	}
	next := *s
	next.Turns = append(turns, s.Turns...)
	next.TurnsNextCursor = a.TurnsNextCursor
	return &next
}

// openInputRequest finds the unanswered input request part with id.
func openInputRequest(s *ChatState, id string) (int, *InputRequestResponsePart) {
	if s.ActiveTurn == nil {
		return -1, nil
	}
	for i, p := range s.ActiveTurn.ResponseParts {
		if ir, ok := p.(*InputRequestResponsePart); ok && ir.Response == nil && ir.Request.ID == id {
			return i, ir
		}
	}
	return -1, nil
}

func replacePart(s *ChatState, i int, p ResponsePart) *ChatState {
	return withParts(s, s.ActiveTurn.ID, func(parts []ResponsePart) []ResponsePart {
		out := slices.Clone(parts)
		out[i] = p
		return out
	})
}

func inputRequested(s *ChatState, a *ChatInputRequestedAction) *ChatState {
	if s.ActiveTurn == nil {
		return s
	}
	part := &InputRequestResponsePart{Request: a.Request}
	var next *ChatState
	if i, existing := openInputRequest(s, a.Request.ID); existing != nil {
		// A re-sent request keeps the answers drafted so far.
		if part.Request.Answers.IsZero() {
			part.Request.Answers = existing.Request.Answers
		}
		next = replacePart(s, i, part)
	} else {
		next = withParts(s, s.ActiveTurn.ID, func(parts []ResponsePart) []ResponsePart {
			return append(slices.Clip(parts), part)
		})
	}
	next.Status = chatStatus(next, 0).With(StatusIsRead, false)
	return next
}

func inputAnswerChanged(s *ChatState, a *ChatInputAnswerChangedAction) *ChatState {
	i, existing := openInputRequest(s, a.RequestID)
	if existing == nil {
		return s
	}
	answers := existing.Request.Answers.Clone()
	if a.Answer == nil {
		answers.Delete(a.QuestionID)
	} else {
		answers.Set(a.QuestionID, a.Answer)
	}
	if answers.Len() == 0 {
		answers = Map[ChatInputAnswer]{} // the zero Map: absent on the wire
	}
	part := *existing
	part.Request.Answers = answers
	return replacePart(s, i, &part)
}

func inputCompleted(s *ChatState, a *ChatInputCompletedAction) *ChatState {
	i, existing := openInputRequest(s, a.RequestID)
	if existing == nil {
		return s
	}
	answers := existing.Request.Answers.Clone()
	for k, v := range a.Answers.All() {
		answers.Set(k, v)
	}
	if answers.Len() == 0 {
		answers = Map[ChatInputAnswer]{}
	}
	part := *existing
	part.Request.Answers = answers
	part.Response = new(a.Response)
	next := replacePart(s, i, &part)
	next.Status = chatStatus(next, 0)
	return next
}

func pendingMessageSet(s *ChatState, a *ChatPendingMessageSetAction) *ChatState {
	entry := PendingMessage{ID: a.ID, Message: a.Message}
	next := *s
	if a.Kind == PendingMessageKindSteering {
		next.SteeringMessage = &entry
		return &next
	}
	next.QueuedMessages = upsert(s.QueuedMessages, entry, func(m PendingMessage) bool { return m.ID == a.ID })
	return &next
}

func pendingMessageRemoved(s *ChatState, a *ChatPendingMessageRemovedAction) *ChatState {
	next := *s
	if a.Kind == PendingMessageKindSteering {
		if s.SteeringMessage == nil || s.SteeringMessage.ID != a.ID {
			return s
		}
		next.SteeringMessage = nil
		return &next
	}
	i := slices.IndexFunc(s.QueuedMessages, func(m PendingMessage) bool { return m.ID == a.ID })
	if i < 0 {
		return s
	}
	next.QueuedMessages = slices.DeleteFunc(slices.Clone(s.QueuedMessages), func(m PendingMessage) bool { return m.ID == a.ID })
	if len(next.QueuedMessages) == 0 {
		next.QueuedMessages = nil
	}
	return &next
}

// queuedMessagesReordered puts the queued messages in the given order;
// unknown and repeated ids are ignored and unnamed messages keep their
// relative order at the end.
func queuedMessagesReordered(s *ChatState, a *ChatQueuedMessagesReorderedAction) *ChatState {
	if s.QueuedMessages == nil {
		return s
	}
	byID := make(map[string]PendingMessage, len(s.QueuedMessages))
	for _, m := range s.QueuedMessages {
		byID[m.ID] = m
	}
	placed := map[string]bool{}
	out := make([]PendingMessage, 0, len(s.QueuedMessages))
	for _, id := range a.Order {
		if m, ok := byID[id]; ok && !placed[id] {
			placed[id] = true
			out = append(out, m)
		}
	}
	for _, m := range s.QueuedMessages {
		if !placed[m.ID] {
			out = append(out, m)
		}
	}
	next := *s
	next.QueuedMessages = out
	return &next
}

// backgroundWorkID is the id every kind of background work carries.
func backgroundWorkID(w BackgroundWork) string {
	switch w := w.(type) {
	case *BackgroundShellWork:
		return w.ID
	case *BackgroundSubagentWork:
		return w.ID
	case *Unknown:
		return w.member("id")
	}
	return ""
}

// ErrorPart returns the error a turn ended with: its last part, when that
// is an error part, else nil.
func (t *Turn) ErrorPart() *ErrorResponsePart {
	if n := len(t.ResponseParts); n > 0 {
		if e, ok := t.ResponseParts[n-1].(*ErrorResponsePart); ok {
			return e
		}
	}
	return nil
}
