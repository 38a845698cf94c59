package support

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces every value the Redactor removes.
const Redacted = "REDACTED"

// Redaction says what was removed from a file: the key path or the kind of pattern, and how often.
// It never holds the value.
type Redaction struct {
	File  string `json:"file"`
	What  string `json:"what"`
	Count int    `json:"count"`
}

// textRule is a credential shape found in free text (logs, rendered objects). A match's group 1,
// when the pattern has one, is kept: it is the key or scheme in front of the value.
type textRule struct {
	what string
	re   *regexp.Regexp
}

// The shapes below are public formats:
//   - NGC personal and service API keys start with "nvapi-"
//     (https://docs.nvidia.com/ngc/latest/ngc-user-guide.html#generating-api-key);
//   - NLS client configuration tokens are JWTs
//     (https://docs.nvidia.com/license-system/latest/nvidia-license-system-user-guide/);
//   - Docker registry credentials are {"auths": …} JSON, base64-encoded in a kubernetes.io/dockerconfigjson
//     Secret (https://kubernetes.io/docs/concepts/configuration/secret/#docker-config-secrets);
//   - HTTP bearer credentials (RFC 6750), PEM private keys (RFC 7468).
var textRules = []textRule{
	{"PEM private key", regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)},
	{"NGC API key (nvapi-…)", regexp.MustCompile(`nvapi-[A-Za-z0-9_\-]{8,}`)},
	{"JSON web token (e.g. an NLS client token)", regexp.MustCompile(`eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*`)},
	// base64 of `{"auths":` and of `{ "auths":`, the start of a dockerconfigjson.
	{"base64 Docker registry credentials (dockerconfigjson)", regexp.MustCompile(`(?:eyJhdXRocyI6|eyAiYXV0aHMiOi)[A-Za-z0-9+/=]*`)},
	{"Docker registry auth", regexp.MustCompile(`(?i)"auth"\s*:\s*"(?P<v>[^"]+)`)},
	{"bearer token", regexp.MustCompile(`(?i)bearer\s+(?P<v>[A-Za-z0-9._~+/=\-]{8,})`)},
	{"basic auth", regexp.MustCompile(`(?i)authorization:\s*basic\s+(?P<v>[A-Za-z0-9+/=]{8,})`)},
	{"credential in a URL", regexp.MustCompile(`[a-z][a-z0-9+.\-]*://[^/\s:@"']+:(?P<v>[^/\s@"']+)@`)},
	// key: value and key=value where the key is named like a credential; the value runs to the next
	// space, quote, comma or brace.
	{"value of a credential-like key", regexp.MustCompile(`(?i)[\w.\-]*(?:password|passwd|passphrase|secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|credentials?)["']?[ \t]*[:=][ \t]*["']?(?P<v>[^\s"',;{}\[\]]+)`)},
}

// Redactor removes credentials from what the bundle stores and remembers what it removed where.
type Redactor struct {
	counts map[[2]string]int
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor { return &Redactor{counts: map[[2]string]int{}} }

func (r *Redactor) note(file, what string) { r.counts[[2]string{file, what}]++ }

// Redactions lists what was removed, by file and then by what.
func (r *Redactor) Redactions() []Redaction {
	out := make([]Redaction, 0, len(r.counts))
	for k, n := range r.counts {
		out = append(out, Redaction{File: k[0], What: k[1], Count: n})
	}
	slices.SortFunc(out, func(a, b Redaction) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return strings.Compare(a.What, b.What)
	})
	return out
}

// Text redacts credential shapes in free text, the last defence of every file.
func (r *Redactor) Text(file string, s string) string {
	for _, rule := range textRules {
		v := rule.re.SubexpIndex("v")
		s = rule.re.ReplaceAllStringFunc(s, func(m string) string {
			if v < 0 {
				r.note(file, rule.what)
				return Redacted
			}
			idx := rule.re.FindStringSubmatchIndex(m)
			val := m[idx[2*v]:idx[2*v+1]]
			if val == Redacted || isPlaceholder(val) {
				return m
			}
			r.note(file, rule.what)
			return m[:idx[2*v]] + Redacted + m[idx[2*v+1]:]
		})
	}
	return s
}

// isPlaceholder is a value that names or refers to a credential rather than being one.
func isPlaceholder(v string) bool {
	switch strings.ToLower(v) {
	case "", "null", "nil", "<nil>", "true", "false", "none", "redacted", "***", "<redacted>":
		return true
	}
	return false
}

// sensitiveKey says whether a key (of a values map, an object or an environment variable) names a
// credential. Keys that name where a credential is kept (secretName, tokenFile, …) are not: support
// needs them.
func sensitiveKey(k string) bool {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "").Replace(k))
	for _, suffix := range []string{"name", "names", "ref", "file", "path", "dir", "enabled", "namespace", "create", "type", "seconds", "mountpath", "selector", "volume"} {
		if strings.HasSuffix(n, suffix) {
			return false
		}
	}
	for _, part := range []string{"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "privatekey", "credential", "dockerconfigjson"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	// A key ending in key (ngcKey, licenseKey, NGC_API_KEY) is a credential; "key" alone and
	// topologyKey are everywhere in Kubernetes objects (tolerations, selectors, affinity).
	switch n {
	case "key", "topologykey", "publickey", "labelkey":
		return false
	}
	return strings.HasSuffix(n, "key")
}

// Value redacts, in a decoded JSON/YAML tree, every string under a credential-like key and every
// environment variable ({name, value}) whose name is credential-like, then the text shapes in the
// remaining strings. path names the tree's root in the manifest (e.g. "values").
func (r *Redactor) Value(file, path string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		name, hasName := x["name"].(string)
		for k, val := range x {
			p := path + "." + k
			if path == "" {
				p = k
			}
			if s, ok := val.(string); ok && s != "" && !isPlaceholder(s) {
				if sensitiveKey(k) || (hasName && k == "value" && sensitiveKey(name)) {
					if k == "value" {
						p = fmt.Sprintf("%s[%s].value", path, name)
					}
					r.note(file, p)
					out[k] = Redacted
					continue
				}
			}
			out[k] = r.Value(file, p, val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = r.Value(file, path, val)
		}
		return out
	case string:
		return r.Text(file, x)
	default:
		return v
	}
}
