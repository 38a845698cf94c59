package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

const interrupted = 130

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ctx-%02d", i)
	}
	return out
}

func TestRunKeepsTheOrderGivenWhateverOrderTheContextsFinishIn(t *testing.T) {
	contexts := names(5)
	// Each context finishes only after the one after it: the last finishes first.
	done := make([]chan struct{}, len(contexts)+1)
	for i := range done {
		done[i] = make(chan struct{})
	}
	close(done[len(contexts)])
	var finished []string
	var mu sync.Mutex
	out := Run(t.Context(), contexts, len(contexts), interrupted, func(_ context.Context, name string) (string, int, error) {
		i := slices.Index(contexts, name)
		<-done[i+1]
		mu.Lock()
		finished = append(finished, name)
		mu.Unlock()
		close(done[i])
		return "result of " + name, i, nil
	})
	if slices.Equal(finished, contexts) {
		t.Fatalf("the contexts finished in the order given (%v): the test proves nothing", finished)
	}
	for i, o := range out {
		if o.Context != contexts[i] || o.Result != "result of "+contexts[i] || o.ExitCode != i || o.Err != nil {
			t.Errorf("outcome %d: %+v", i, o)
		}
	}
}

func TestRunRunsAtMostParallelAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parallel int
		want     int
	}{
		{"two at once", 2, 2},
		{"one at a time", 1, 1},
		{"zero means the default", 0, DefaultParallel},
		{"more than there are contexts runs them all", 50, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var running, most atomic.Int32
			started := make(chan struct{}, 9)
			release := make(chan struct{})
			go func() {
				// Let the first wave fill every slot, then let everything run to the end.
				for range tc.want {
					<-started
				}
				close(release)
			}()
			out := Run(t.Context(), names(9), tc.parallel, interrupted, func(context.Context, string) (int, int, error) {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				started <- struct{}{}
				<-release
				running.Add(-1)
				return 0, 0, nil
			})
			if int(most.Load()) != tc.want {
				t.Errorf("%d ran at once, want %d", most.Load(), tc.want)
			}
			if len(out) != 9 {
				t.Errorf("%d outcomes", len(out))
			}
		})
	}
}

func TestRunNeverStopsTheOthersForOneContextsFailure(t *testing.T) {
	boom := errors.New("forbidden")
	out := Run(t.Context(), names(4), 1, interrupted, func(_ context.Context, name string) (int, int, error) {
		if name == "ctx-01" {
			return 0, 1, boom
		}
		return 7, 0, nil
	})
	for i, o := range out {
		switch {
		case i == 1 && (o.ExitCode != 1 || !errors.Is(o.Err, boom)):
			t.Errorf("the failing context: %+v", o)
		case i != 1 && (o.ExitCode != 0 || o.Result != 7 || o.Err != nil):
			t.Errorf("context %d: %+v", i, o)
		}
	}
}

func TestRunCancelledStopsTheRunningAndStartsNoOther(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	started := make(chan struct{}, 2)
	go func() {
		<-started
		<-started
		cancel() // Ctrl-C while the first two run
	}()
	out := Run(ctx, names(6), 2, interrupted, func(ctx context.Context, _ string) (int, int, error) {
		calls.Add(1)
		started <- struct{}{}
		<-ctx.Done()
		return 0, interrupted, ctx.Err()
	})
	if calls.Load() != 2 {
		t.Errorf("%d contexts started, want the 2 running when the run was cancelled", calls.Load())
	}
	for i, o := range out {
		if o.Context != names(6)[i] || o.ExitCode != interrupted || !errors.Is(o.Err, context.Canceled) {
			t.Errorf("outcome %d: %+v", i, o)
		}
	}
}

func TestSeverityWorst(t *testing.T) {
	s := Severity{130, 9, 4, 7}
	for _, tc := range []struct {
		name  string
		codes []int
		want  int
	}{
		{"none is 0", nil, 0},
		{"the earlier in the order wins", []int{7, 4, 0}, 4},
		{"the first listed wins over all", []int{4, 130, 9}, 130},
		{"an unlisted code is worse than success", []int{0, 42}, 42},
		{"an unlisted code is better than a listed one", []int{42, 7}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Worst(tc.codes...); got != tc.want {
				t.Errorf("Worst(%v) = %d, want %d", tc.codes, got, tc.want)
			}
		})
	}
}
