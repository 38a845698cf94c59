package runner

import (
	"context"
	"testing"

	"github.com/gpuctl/gpuctl/internal/lock"
)

func TestInterrupted(t *testing.T) {
	signalled, stop := context.WithCancel(context.Background())
	stop()
	lost, lose := context.WithCancelCause(context.Background())
	lose(lock.ErrLost)
	late, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-late.Done()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"a signal", signalled, true},
		{"a lost lock is not an interrupt", lost, false},
		{"the deadline is not an interrupt", late, false},
		{"running", context.Background(), false},
	} {
		if got := Interrupted(tc.ctx); got != tc.want {
			t.Errorf("%s: interrupted = %v, want %v", tc.name, got, tc.want)
		}
	}
}
