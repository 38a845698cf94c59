package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestTagCacheAsksEachRepositoryOnce: the lookup before --precompiled auto's plan and preflight's
// check read the same tag list; the registry sees one request per repository.
func TestTagCacheAsksEachRepositoryOnce(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/tags/list") {
			asked.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"name":"nvidia/driver","tags":["595-6.8.0-60-generic-ubuntu24.04"]}`))
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/nvidia/driver"
	c := &tagCache{}
	for range 3 {
		tags, err := c.Tags(context.Background(), repo, nil)
		if err != nil || len(tags) != 1 {
			t.Fatalf("tags %v, %v", tags, err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the registry was asked %d times, want once", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	other := repo + "-other"
	if _, err := c.Tags(ctx, other, nil); err == nil {
		t.Fatal("a cancelled lookup succeeded")
	}
	if _, ok := c.lists[other]; ok {
		t.Error("an answer cut short by the run's context was kept")
	}
}
