package protocol

import (
	"slices"
	"time"
)

// ReduceChat applies a chat-channel action. now is the time the action is
// applied; it becomes the chat's modifiedAt when the action moves it.
func ReduceChat(s *ChatState, a Action, now time.Time) *ChatState {
	switch a := a.(type) {
	case *ChatTurnStartedAction:
		return turnStarted(s, a, now)
	case *ChatDeltaAction:
		return updatePart(s, a.TurnID, a.PartID, func(p ResponsePart) ResponsePart {
			if md, ok := p.(*MarkdownResponsePart); ok {
				next := *md
				next.Content += a.Content
				return &next
			}
			return p
		})
	case *ChatReasoningAction:
		return updatePart(s, a.TurnID, a.PartID, func(p ResponsePart) ResponsePart {
			if r, ok := p.(*ReasoningResponsePart); ok {
				next := *r
				next.Content += a.Content
				return &next
			}
			return p
		})
	case *ChatResponsePartAction:
		return withParts(s, a.TurnID, func(parts []ResponsePart) []ResponsePart {
			return append(slices.Clip(parts), a.Part)
		})
	case *ChatTurnCompleteAction:
		return endTurn(s, a.TurnID, TurnStateComplete, a.Duration, 0, nil, now)
	case *ChatTurnCancelledAction:
		return endTurn(s, a.TurnID, TurnStateCancelled, a.Duration, 0, nil, now)
	case *ChatErrorAction:
		return endTurn(s, a.TurnID, TurnStateError, a.Duration, StatusError, &a.Error, now)
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
		return truncated(s, a, now)
	case *ChatTurnsLoadedAction:
		return turnsLoaded(s, a)
	case *ChatInputRequestedAction:
		return inputRequested(s, a, now)
	case *ChatInputAnswerChangedAction:
		return inputAnswerChanged(s, a, now)
	case *ChatInputCompletedAction:
		return inputCompleted(s, a, now)
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

func turnStarted(s *ChatState, a *ChatTurnStartedAction, now time.Time) *ChatState {
	next := *s
	next.ActiveTurn = &ActiveTurn{
		ID:            a.TurnID,
		StartedAt:     a.StartedAt,
		Message:       a.Message,
		ResponseParts: []ResponsePart{},
	}
	next.Status = chatStatus(&next, 0).With(StatusIsRead, false)
	next.ModifiedAt = FormatTime(now)
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
// open are cancelled as skipped: a finished turn runs nothing.
func endTurn(s *ChatState, turnID string, state TurnState, duration float64, terminal SessionStatus, turnErr *ErrorInfo, now time.Time) *ChatState {
	active := s.ActiveTurn
	if active == nil || active.ID != turnID {
		return s
	}
	parts := make([]ResponsePart, len(active.ResponseParts))
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
	turn := Turn{
		ID:            active.ID,
		StartedAt:     new(active.StartedAt),
		Duration:      new(max(0, duration)),
		Message:       active.Message,
		ResponseParts: parts,
		Usage:         active.Usage,
		State:         state,
		Error:         turnErr,
	}
	next := *s
	// The finished turns are shared with earlier states; appending must
	// not write into an array another state can see.
	next.Turns = append(slices.Clip(s.Turns), turn)
	next.ActiveTurn = nil
	next.ModifiedAt = FormatTime(now)
	next.Status = chatStatus(&next, terminal)
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

func truncated(s *ChatState, a *ChatTruncatedAction, now time.Time) *ChatState {
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
	next.ModifiedAt = FormatTime(now)
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

func inputRequested(s *ChatState, a *ChatInputRequestedAction, now time.Time) *ChatState {
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
	next.ModifiedAt = FormatTime(now)
	return next
}

func inputAnswerChanged(s *ChatState, a *ChatInputAnswerChangedAction, now time.Time) *ChatState {
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
		answers = Map[ChatInputAnswer]{}
	}
	part := *existing
	part.Request.Answers = answers
	next := replacePart(s, i, &part)
	next.ModifiedAt = FormatTime(now)
	return next
}

func inputCompleted(s *ChatState, a *ChatInputCompletedAction, now time.Time) *ChatState {
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
	next.ModifiedAt = FormatTime(now)
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
