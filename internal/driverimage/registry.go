package driverimage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// DefaultTimeout bounds one repository's tag listing, every page and token request included: long
// enough for a registry across the world, short enough that an air-gapped install learns it at once.
const DefaultTimeout = 15 * time.Second

// ErrNoRepository is returned when the registry answers that the repository does not exist: it holds
// no image under that name, so no tag of it can be pulled.
var ErrNoRepository = errors.New("the registry has no such repository")

// Registry lists tags through the OCI distribution API
// (https://github.com/opencontainers/distribution-spec/blob/main/spec.md#listing-tags).
type Registry struct {
	// Timeout bounds one Tags call; zero means DefaultTimeout. The caller's context bounds it too.
	Timeout time.Duration
	// Transport is the HTTP transport; nil means http.DefaultTransport.
	Transport http.RoundTripper
}

// Tags lists the tags of repository ("nvcr.io/nvidia/driver", "mirror.example:5000/nvidia/driver").
// dockerConfigs are the .dockerconfigjson of pull secrets: the first login for the repository's
// registry is used, else it asks anonymously. A registry on a loopback address is spoken to in plain
// HTTP, as Docker does for 127.0.0.0/8 unasked
// (https://docs.docker.com/reference/cli/dockerd/#insecure-registries).
func (r *Registry) Tags(ctx context.Context, repository string, dockerConfigs [][]byte) ([]string, error) {
	timeout := r.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	repo, err := remote.NewRepository(repository)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", repository, err)
	}
	host := repo.Reference.Registry
	repo.PlainHTTP = loopback(host)
	client := &auth.Client{Client: &http.Client{Transport: r.Transport}, Cache: auth.NewCache()}
	if cred, ok := login(host, dockerConfigs); ok {
		client.Credential = auth.StaticCredential(host, cred)
	}
	repo.Client = client
	var tags []string
	err = repo.Tags(ctx, "", func(page []string) error {
		tags = append(tags, page...)
		return nil
	})
	var resp *errcode.ErrorResponse
	switch {
	case err == nil:
		return tags, nil
	case errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%s: %w", repository, ErrNoRepository)
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%s: no answer within %s", host, timeout)
	}
	return nil, err
}

// loopback reports whether a registry host[:port] is on this machine.
func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// dockerConfig is the part of a .dockerconfigjson that holds logins
// (https://kubernetes.io/docs/concepts/containers/images/#config-json).
type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
}

// login finds host's login in the configs: an entry keyed by the host, with or without a scheme or
// path ("https://nvcr.io/v2/" counts for nvcr.io).
func login(host string, configs [][]byte) (auth.Credential, bool) {
	for _, raw := range configs {
		var c dockerConfig
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		for key, a := range c.Auths {
			k := strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
			k, _, _ = strings.Cut(k, "/")
			if k != host && !(host == "registry-1.docker.io" && k == "index.docker.io") {
				continue
			}
			cred := auth.Credential{Username: a.Username, Password: a.Password, RefreshToken: a.IdentityToken}
			if a.Auth != "" {
				if dec, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
					if u, p, ok := strings.Cut(string(dec), ":"); ok {
						cred.Username, cred.Password = u, p
					}
				}
			}
			return cred, true
		}
	}
	return auth.Credential{}, false
}
