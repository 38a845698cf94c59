package kube

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// EventTime is when an event last happened, across the core/v1 and events.k8s.io/v1 ways of recording
// it: an events.k8s.io/v1 series' last observation (its eventTime is the series' first), core/v1's
// lastTimestamp, events.k8s.io/v1's eventTime, core/v1's firstTimestamp, and last the object's own
// creation (an event some client wrote with none of them).
func EventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}
