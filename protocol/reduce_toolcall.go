package protocol

// The tool call state machine:
//
//	streaming → pending-confirmation → running ⇄ auth-required
//	                 ↓ denied            ↓
//	             cancelled   pending-result-confirmation → completed | cancelled
//
// Every state carries the call's identity (toolCallBase); a transition
// builds the next state from the members that state defines.

// toolCallBase is what a tool call keeps through every state.
type toolCallBase struct {
	id, name, display string
	intention         *string
	contributor       ToolCallContributor
	meta              Object
}

func baseOf(tc ToolCallState) toolCallBase {
	switch t := tc.(type) {
	case *ToolCallStreamingState:
		return toolCallBase{t.ToolCallID, t.ToolName, t.DisplayName, t.Intention, t.Contributor, t.Meta}
	case *ToolCallPendingConfirmationState:
		return toolCallBase{t.ToolCallID, t.ToolName, t.DisplayName, t.Intention, t.Contributor, t.Meta}
	case *ToolCallRunningState:
		return toolCallBase{t.ToolCallID, t.ToolName, t.DisplayName, t.Intention, t.Contributor, t.Meta}
	case *ToolCallAuthRequiredState:
		mcp := t.Contributor
		return toolCallBase{t.ToolCallID, t.ToolName, t.DisplayName, t.Intention, &mcp, t.Meta}
	case *ToolCallPendingResultConfirmationState:
		return toolCallBase{t.ToolCallID, t.ToolName, t.DisplayName, t.Intention, t.Contributor, t.Meta}
	case *ToolCallCompletedState:
		return toolCallBase{t.ToolCallID, t.ToolName, t.DisplayName, t.Intention, t.Contributor, t.Meta}
	case *ToolCallCancelledState:
		return toolCallBase{t.ToolCallID, t.ToolName, t.DisplayName, t.Intention, t.Contributor, t.Meta}
	}
	return toolCallBase{}
}

// ToolCallIDOf is the id of a tool call in any state; "" for a state this
// version does not know.
func ToolCallIDOf(tc ToolCallState) string {
	return baseOf(tc).id
}

func toolCallID(tc ToolCallState) string {
	if tc == nil {
		return "\x00"
	}
	if _, ok := tc.(*Unknown); ok {
		return "\x00"
	}
	return baseOf(tc).id
}

// withMeta returns the base with the action's _meta, when it has one.
func (b toolCallBase) withMeta(meta Object) toolCallBase {
	if meta != nil {
		b.meta = meta
	}
	return b
}

// params returns the invocation message and input of a call past streaming.
func params(tc ToolCallState) (StringOrMarkdown, *ToolInput) {
	switch t := tc.(type) {
	case *ToolCallStreamingState:
		if t.InvocationMessage != nil {
			return *t.InvocationMessage, nil
		}
		return StringOrMarkdown{}, nil
	case *ToolCallPendingConfirmationState:
		return t.InvocationMessage, t.ToolInput
	case *ToolCallRunningState:
		return t.InvocationMessage, t.ToolInput
	case *ToolCallAuthRequiredState:
		return t.InvocationMessage, t.ToolInput
	case *ToolCallPendingResultConfirmationState:
		return t.InvocationMessage, t.ToolInput
	case *ToolCallCompletedState:
		return t.InvocationMessage, t.ToolInput
	case *ToolCallCancelledState:
		return t.InvocationMessage, t.ToolInput
	}
	return StringOrMarkdown{}, nil
}

func running(b toolCallBase, msg StringOrMarkdown, input *ToolInput, confirmed ToolCallConfirmationReason) *ToolCallRunningState {
	return &ToolCallRunningState{
		ToolCallID: b.id, ToolName: b.name, DisplayName: b.display,
		Intention: b.intention, Contributor: b.contributor, Meta: b.meta,
		InvocationMessage: msg, ToolInput: input, Confirmed: confirmed,
	}
}

func cancelled(b toolCallBase, msg StringOrMarkdown, input *ToolInput, reason ToolCallCancellationReason) *ToolCallCancelledState {
	return &ToolCallCancelledState{
		ToolCallID: b.id, ToolName: b.name, DisplayName: b.display,
		Intention: b.intention, Contributor: b.contributor, Meta: b.meta,
		InvocationMessage: msg, ToolInput: input, Reason: reason,
	}
}

// skipToolCall returns the cancelled state of a call still open when its
// turn ends, or nil for one already finished.
func skipToolCall(tc ToolCallState) ToolCallState {
	switch tc.(type) {
	case *ToolCallCompletedState, *ToolCallCancelledState, *Unknown, nil:
		return nil
	}
	msg, input := params(tc)
	return cancelled(baseOf(tc), msg, input, ToolCallCancellationReasonSkipped)
}

// reduceToolCall applies a tool call action to the call it names in the
// active turn.
func reduceToolCall(s *ChatState, a Action) *ChatState {
	switch a := a.(type) {
	case *ChatToolCallStartAction:
		return withParts(s, a.TurnID, func(parts []ResponsePart) []ResponsePart {
			return append(parts[:len(parts):len(parts)], &ToolCallResponsePart{ToolCall: &ToolCallStreamingState{
				ToolCallID: a.ToolCallID, ToolName: a.ToolName, DisplayName: a.DisplayName,
				Intention: a.Intention, Contributor: a.Contributor, Meta: a.Meta,
			}})
		})
	case *ChatToolCallDeltaAction:
		return updateToolCall(s, a.TurnID, a.ToolCallID, func(tc ToolCallState) ToolCallState {
			st, ok := tc.(*ToolCallStreamingState)
			if !ok {
				return tc
			}
			next := *st
			if a.Meta != nil {
				next.Meta = a.Meta
			}
			if a.Content != nil {
				partial := *a.Content
				if st.PartialInput != nil {
					partial = *st.PartialInput + partial
				}
				next.PartialInput = &partial
			}
			if a.InvocationMessage != nil {
				next.InvocationMessage = a.InvocationMessage
			}
			return &next
		})
	case *ChatToolCallReadyAction:
		return refreshStatus(updateToolCall(s, a.TurnID, a.ToolCallID, func(tc ToolCallState) ToolCallState {
			return toolCallReady(tc, a)
		}))
	case *ChatToolCallConfirmedAction:
		return refreshStatus(updateToolCall(s, a.TurnID, a.ToolCallID, func(tc ToolCallState) ToolCallState {
			return toolCallConfirmed(tc, a)
		}))
	case *ChatToolCallCompleteAction:
		return refreshStatus(updateToolCall(s, a.TurnID, a.ToolCallID, func(tc ToolCallState) ToolCallState {
			return toolCallComplete(tc, a)
		}))
	case *ChatToolCallResultConfirmedAction:
		return refreshStatus(updateToolCall(s, a.TurnID, a.ToolCallID, func(tc ToolCallState) ToolCallState {
			return toolCallResultConfirmed(tc, a)
		}))
	case *ChatToolCallContentChangedAction:
		return updateToolCall(s, a.TurnID, a.ToolCallID, func(tc ToolCallState) ToolCallState {
			r, ok := tc.(*ToolCallRunningState)
			if !ok {
				return tc
			}
			next := *r
			if a.Meta != nil {
				next.Meta = a.Meta
			}
			next.Content = a.Content
			return &next
		})
	case *ChatToolCallAuthRequiredAction:
		return refreshStatus(updateToolCall(s, a.TurnID, a.ToolCallID, func(tc ToolCallState) ToolCallState {
			r, ok := tc.(*ToolCallRunningState)
			if !ok {
				return tc
			}
			// Only a call an MCP server contributed can wait on its auth.
			mcp, ok := r.Contributor.(*ToolCallMCPContributor)
			if !ok {
				return tc
			}
			b := baseOf(tc).withMeta(a.Meta)
			return &ToolCallAuthRequiredState{
				ToolCallID: b.id, ToolName: b.name, DisplayName: b.display,
				Intention: b.intention, Contributor: *mcp, Meta: b.meta,
				InvocationMessage: r.InvocationMessage, ToolInput: r.ToolInput,
				Confirmed: r.Confirmed, SelectedOption: r.SelectedOption,
				Content: r.Content, Auth: a.Auth,
			}
		}))
	case *ChatToolCallAuthResolvedAction:
		return refreshStatus(updateToolCall(s, a.TurnID, a.ToolCallID, func(tc ToolCallState) ToolCallState {
			ar, ok := tc.(*ToolCallAuthRequiredState)
			if !ok {
				return tc
			}
			next := running(baseOf(tc).withMeta(a.Meta), ar.InvocationMessage, ar.ToolInput, ar.Confirmed)
			next.SelectedOption = ar.SelectedOption
			next.Content = ar.Content
			return next
		}))
	}
	return s
}

// updateToolCall applies update to the call named toolCallID in the active
// turn of turnID.
func updateToolCall(s *ChatState, turnID, toolCallID string, update func(ToolCallState) ToolCallState) *ChatState {
	return updatePart(s, turnID, toolCallID, func(p ResponsePart) ResponsePart {
		tp, ok := p.(*ToolCallResponsePart)
		if !ok {
			return p
		}
		updated := update(tp.ToolCall)
		if updated == tp.ToolCall {
			return p
		}
		next := *tp
		next.ToolCall = updated
		return &next
	})
}

func toolCallReady(tc ToolCallState, a *ChatToolCallReadyAction) ToolCallState {
	var input *ToolInput
	var pending *ToolCallPendingConfirmationState
	switch t := tc.(type) {
	case *ToolCallStreamingState:
	case *ToolCallRunningState:
		input = t.ToolInput
	case *ToolCallPendingConfirmationState:
		input, pending = t.ToolInput, t
	default:
		return tc
	}
	b := baseOf(tc).withMeta(a.Meta)
	b.contributor = refineContributor(b.contributor, a.Contributor)
	if a.Intention != nil {
		b.intention = a.Intention
	}
	if a.ToolInput != nil {
		input = a.ToolInput
	}
	if a.Confirmed != nil && *a.Confirmed != "" {
		return running(b, a.InvocationMessage, input, *a.Confirmed)
	}
	next := &ToolCallPendingConfirmationState{
		ToolCallID: b.id, ToolName: b.name, DisplayName: b.display,
		Intention: b.intention, Contributor: b.contributor, Meta: b.meta,
		InvocationMessage: a.InvocationMessage, ToolInput: input,
		ConfirmationTitle: a.ConfirmationTitle, RiskAssessment: a.RiskAssessment,
		Edits: a.Edits, Editable: a.Editable, Options: a.Options,
	}
	// A call asked to confirm again keeps what the first request said and
	// this one does not.
	if pending != nil {
		if next.ConfirmationTitle == nil {
			next.ConfirmationTitle = pending.ConfirmationTitle
		}
		if next.RiskAssessment == nil {
			next.RiskAssessment = pending.RiskAssessment
		}
		if next.Edits == nil {
			next.Edits = pending.Edits
		}
		if next.Editable == nil {
			next.Editable = pending.Editable
		}
		if next.Options == nil {
			next.Options = pending.Options
		}
	}
	return next
}

// refineContributor settles who contributes a call. A client contributor
// is fixed when the call starts: no later action moves the call to another
// client, or from a client to anybody else.
func refineContributor(current, next ToolCallContributor) ToolCallContributor {
	if next == nil {
		return current
	}
	if cur, ok := current.(*ToolCallClientContributor); ok {
		if n, ok := next.(*ToolCallClientContributor); ok && n.ClientID == cur.ClientID {
			return next
		}
		return current
	}
	if _, ok := next.(*ToolCallClientContributor); ok {
		return current
	}
	return next
}

func selectedOption(options []ConfirmationOption, id *string) *ConfirmationOption {
	if id == nil || *id == "" {
		return nil
	}
	for i := range options {
		if options[i].ID == *id {
			return &options[i]
		}
	}
	return nil
}

func toolCallConfirmed(tc ToolCallState, a *ChatToolCallConfirmedAction) ToolCallState {
	p, ok := tc.(*ToolCallPendingConfirmationState)
	if !ok {
		return tc
	}
	b := baseOf(tc).withMeta(a.Meta)
	option := selectedOption(p.Options, a.SelectedOptionID)
	if a.Approved {
		input := p.ToolInput
		// Edited input replaces inline input; referenced input the host
		// rewrote at its source before echoing the action.
		if a.EditedToolInput != nil && input != nil && input.Ref == nil {
			input = InlineInput(*a.EditedToolInput)
		}
		confirmed := ToolCallConfirmationReasonUserAction
		if a.Confirmed != nil {
			confirmed = *a.Confirmed
		}
		next := running(b, p.InvocationMessage, input, confirmed)
		next.SelectedOption = option
		return next
	}
	reason := ToolCallCancellationReasonDenied
	if a.Reason != nil {
		reason = *a.Reason
	}
	next := cancelled(b, p.InvocationMessage, p.ToolInput, reason)
	next.ReasonMessage = a.ReasonMessage
	next.UserSuggestion = a.UserSuggestion
	next.SelectedOption = option
	return next
}

func toolCallComplete(tc ToolCallState, a *ChatToolCallCompleteAction) ToolCallState {
	confirmed := ToolCallConfirmationReasonNotNeeded
	var option *ConfirmationOption
	var content []ToolResultContent
	authRequired := false
	switch t := tc.(type) {
	case *ToolCallRunningState:
		confirmed, option = t.Confirmed, t.SelectedOption
	case *ToolCallPendingConfirmationState:
	case *ToolCallAuthRequiredState:
		// Completing a call that waits on auth is the client giving up on
		// it: only a failed result can end it, and it ends at once.
		if a.Result.Success {
			return tc
		}
		confirmed, option, content, authRequired = t.Confirmed, t.SelectedOption, t.Content, true
	default:
		return tc
	}
	b := baseOf(tc).withMeta(a.Meta)
	msg, input := params(tc)
	r := a.Result
	if r.Content != nil {
		content = r.Content
	}
	if a.RequiresResultConfirmation != nil && *a.RequiresResultConfirmation && !authRequired {
		return &ToolCallPendingResultConfirmationState{
			ToolCallID: b.id, ToolName: b.name, DisplayName: b.display,
			Intention: b.intention, Contributor: b.contributor, Meta: b.meta,
			InvocationMessage: msg, ToolInput: input, Confirmed: confirmed, SelectedOption: option,
			Success: r.Success, PastTenseMessage: r.PastTenseMessage, Content: content,
			StructuredContent: r.StructuredContent, Error: r.Error, Extra: r.Extra,
		}
	}
	return &ToolCallCompletedState{
		ToolCallID: b.id, ToolName: b.name, DisplayName: b.display,
		Intention: b.intention, Contributor: b.contributor, Meta: b.meta,
		InvocationMessage: msg, ToolInput: input, Confirmed: confirmed, SelectedOption: option,
		Success: r.Success, PastTenseMessage: r.PastTenseMessage, Content: content,
		StructuredContent: r.StructuredContent, Error: r.Error, Extra: r.Extra,
	}
}

func toolCallResultConfirmed(tc ToolCallState, a *ChatToolCallResultConfirmedAction) ToolCallState {
	p, ok := tc.(*ToolCallPendingResultConfirmationState)
	if !ok {
		return tc
	}
	b := baseOf(tc).withMeta(a.Meta)
	if !a.Approved {
		next := cancelled(b, p.InvocationMessage, p.ToolInput, ToolCallCancellationReasonResultDenied)
		next.SelectedOption = p.SelectedOption
		return next
	}
	return &ToolCallCompletedState{
		ToolCallID: b.id, ToolName: b.name, DisplayName: b.display,
		Intention: b.intention, Contributor: b.contributor, Meta: b.meta,
		InvocationMessage: p.InvocationMessage, ToolInput: p.ToolInput,
		Confirmed: p.Confirmed, SelectedOption: p.SelectedOption,
		Success: p.Success, PastTenseMessage: p.PastTenseMessage, Content: p.Content,
		StructuredContent: p.StructuredContent, Error: p.Error,
	}
}
