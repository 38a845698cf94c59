// Package event is what a run of gpuctl reports as it goes: typed Events about the steps of a Plan
// (started, progress, succeeded, skipped, failed, interrupted) and warnings, sent to a Sink. The
// runner and the verbs emit them; the renderers in internal/ui and the wizard turn them into a
// spinner, plain lines or JSON lines. Nothing here prints.
package event

import "time"

// EventType says what happened to a step.
type Type string

const (
	// StepStarted: a step of the Plan began.
	StepStarted Type = "started"
	// StepProgress: a running step made progress (Done/Total set when countable, e.g. "3/4 GPU nodes validated").
	StepProgress Type = "progress"
	// StepSucceeded: a step ended well (Message says what it did, e.g. "installed revision 1").
	StepSucceeded Type = "succeeded"
	// StepSkipped: a step had nothing to do (Message says why, e.g. "NFD already runs").
	StepSkipped Type = "skipped"
	// StepFailed: a step failed; Err is set and Detail may hold a diagnosis.
	StepFailed Type = "failed"
	// StepInterrupted: the run was interrupted (Ctrl-C) during the step; Message is the state the step
	// left behind, read back from the cluster ("release gpu-operator: deployed revision 2").
	StepInterrupted Type = "interrupted"
	// Warning: something the user should know that does not stop the run.
	Warning Type = "warning"
	// Info: a line of information outside any step (e.g. detection results).
	Info Type = "info"
)

// Event is one thing that happened while a Plan ran. Renderers (internal/ui) turn the stream into a
// spinner, plain lines or JSON lines; the engine never formats output itself.
type Event struct {
	Time time.Time `json:"time"`
	Type Type      `json:"type"`
	// Step is the step's ID (plan.Step.ID), "" for events outside a step.
	Step string `json:"step,omitempty"`
	// Title is the step's one-line title ("Install gpu-operator", …).
	Title string `json:"title,omitempty"`
	// Index and Count place the step in the Plan (1-based), 0 outside a step.
	Index int `json:"index,omitempty"`
	Count int `json:"count,omitempty"`
	// Message is short and concrete: what happened, to what.
	Message string `json:"message,omitempty"`
	// Done and Total count units of progress (nodes, pods); Total 0 when not countable.
	Done  int `json:"done,omitempty"`
	Total int `json:"total,omitempty"`
	// Pending names what a wait still waits on (node names for node waits), so a front end can show
	// each GPU node's state; empty when nothing is pending or the wait has no names.
	Pending []string `json:"pending,omitempty"`
	// PendingOmitted counts the names left out of Pending: the JSON progress stream lists at most
	// ui.MaxPendingJSON of them (Done and Total still count all), or at 2,000 nodes each event would
	// carry tens of kilobytes of names.
	PendingOmitted int `json:"pendingOmitted,omitempty"`
	// Err is the failure of a StepFailed event, as text.
	Err string `json:"error,omitempty"`
	// Hint says what to do next, for failures and warnings.
	Hint string `json:"hint,omitempty"`
	// Detail is a multi-line diagnosis (stuck pods, container states, events, log lines) for failures.
	Detail string `json:"detail,omitempty"`
}

// Sink receives events. Implementations must be safe for use from one goroutine at a time; the
// engine never calls a Sink concurrently.
type Sink interface {
	Event(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Event calls f.
func (f SinkFunc) Event(e Event) { f(e) }

// Or returns s, or a Sink that drops every event when s is nil.
func Or(s Sink) Sink {
	if s == nil {
		return SinkFunc(func(Event) {})
	}
	return s
}
