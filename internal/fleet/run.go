package fleet

import (
	"context"
	"sync"
)

// DefaultParallel is how many contexts a fleet run reads at once (--max-parallel). Each context's
// read is a handful of requests to its own API server, so the bound is not for the clusters' sake
// but for the machine gpuctl runs on: every context costs a client set (TLS handshakes, protobuf
// decoding of its node list), and four keep a laptop or a CI runner of two cores busy without
// swamping it, while a fleet of tens still finishes in a few rounds.
const DefaultParallel = 4

// Outcome is one context's result: what the function returned, the exit code it maps to, and the
// error that ended it (nil when none).
type Outcome[T any] struct {
	Context  string
	Result   T
	ExitCode int
	Err      error
}

// Func reads one context. It returns its result (possibly partial), the exit code gpuctl would exit
// with for that context alone, and the error behind that code.
type Func[T any] func(ctx context.Context, kubeContext string) (T, int, error)

// Run calls fn for every context, at most parallel at once (below 1: DefaultParallel), and returns
// the outcomes in the order of contexts. One context's failure never stops the others; when ctx is
// cancelled, the contexts not yet started are not started and their outcome is ctx's error with
// exit code interrupted, and the running ones see ctx cancelled.
func Run[T any](ctx context.Context, contexts []string, parallel int, interrupted int, fn Func[T]) []Outcome[T] {
	if parallel < 1 {
		parallel = DefaultParallel
	}
	out := make([]Outcome[T], len(contexts))
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, name := range contexts {
		out[i].Context = name
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			out[i].ExitCode, out[i].Err = interrupted, context.Cause(ctx)
			continue
		}
		if ctx.Err() != nil {
			<-slots
			out[i].ExitCode, out[i].Err = interrupted, context.Cause(ctx)
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			out[i].Result, out[i].ExitCode, out[i].Err = fn(ctx, name)
		})
	}
	wg.Wait()
	return out
}
