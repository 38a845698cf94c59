package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventTime(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 5, 1, 12, min, 0, 0, time.UTC) }
	created := metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at(0))}
	tests := []struct {
		name  string
		event corev1.Event
		want  time.Time
	}{
		{"an events.k8s.io/v1 series counts from its last observation, not its first",
			corev1.Event{ObjectMeta: created, EventTime: metav1.NewMicroTime(at(1)),
				Series: &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(at(5))}}, at(5)},
		{"a series that observed nothing yet falls back to lastTimestamp",
			corev1.Event{ObjectMeta: created, LastTimestamp: metav1.NewTime(at(4)), Series: &corev1.EventSeries{}}, at(4)},
		{"a core/v1 event is as late as its lastTimestamp, not its firstTimestamp",
			corev1.Event{ObjectMeta: created, FirstTimestamp: metav1.NewTime(at(2)), LastTimestamp: metav1.NewTime(at(3))}, at(3)},
		{"lastTimestamp wins over eventTime where a client wrote both",
			corev1.Event{ObjectMeta: created, EventTime: metav1.NewMicroTime(at(2)), LastTimestamp: metav1.NewTime(at(3))}, at(3)},
		{"an events.k8s.io/v1 single event is at its eventTime",
			corev1.Event{ObjectMeta: created, EventTime: metav1.NewMicroTime(at(6))}, at(6)},
		{"an event with only firstTimestamp is at it",
			corev1.Event{ObjectMeta: created, FirstTimestamp: metav1.NewTime(at(7))}, at(7)},
		{"an event with no time of its own is at its creation",
			corev1.Event{ObjectMeta: created}, at(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := EventTime(&tc.event); !got.Equal(tc.want) {
				t.Errorf("EventTime = %s, want %s", got, tc.want)
			}
		})
	}
}
