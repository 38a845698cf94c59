package upstream

import (
	"context"
	"errors"
	"testing"
)

// TreeT is Tree for tests: where the sources are missing it skips the test with how to get them, or
// fails it when Required (CI).
func TreeT(t testing.TB, tag string) string {
	t.Helper()
	dir, err := Tree(context.Background(), tag)
	if errors.Is(err, ErrNoSources) && !Required() {
		t.Skipf("%v (set %s=1 to make this a failure)", err, RequireEnv)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
