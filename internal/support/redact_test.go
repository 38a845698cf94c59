package support

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	ngcKey   = "nvapi-Zq3kV9xY2bW7mN1pL4sT8rH6uJ0cF5dG-aE_q"
	nlsToken = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJsaWNlbnNlLXNlcnZlciJ9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
)

func TestTextRedaction(t *testing.T) {
	dockerConfig := base64.StdEncoding.EncodeToString([]byte(`{"auths":{"nvcr.io":{"username":"$oauthtoken","password":"` + ngcKey + `"}}}`))
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx0sZ6m\nq8c7TQ==\n-----END RSA PRIVATE KEY-----"
	for _, tc := range []struct {
		name, in string
		// secret must not survive; keep must.
		secret, keep string
		what         string
	}{
		{"an NGC key in a driver log line is removed", "I1126 pulling from nvcr.io with key " + ngcKey + " for user $oauthtoken", ngcKey, "pulling from nvcr.io", "NGC API key (nvapi-…)"},
		{"an environment dump's NGC_API_KEY is removed", "NGC_API_KEY=s3cr3t-legacy-key-value\nPATH=/usr/bin", "s3cr3t-legacy-key-value", "PATH=/usr/bin", "value of a credential-like key"},
		{"a bearer token in an Authorization header is removed", `GET /v2/ HTTP/1.1 Authorization: Bearer abcDEF0123456789.xyz`, "abcDEF0123456789.xyz", "GET /v2/", "bearer token"},
		{"an NLS client token (a JWT) is removed", "licensing: token " + nlsToken + " loaded", nlsToken, "loaded", "JSON web token (e.g. an NLS client token)"},
		{"a PEM private key is removed whole", "cert follows\n" + pem + "\nend", "MIIEowIBAAKCAQEAx0sZ6m", "cert follows", "PEM private key"},
		{"a base64 dockerconfigjson is removed", ".dockerconfigjson: " + dockerConfig, dockerConfig[12:], ".dockerconfigjson:", "base64 Docker registry credentials (dockerconfigjson)"},
		{"a registry auth in plain JSON is removed", `{"auths":{"nvcr.io":{"auth":"JG9hdXRodG9rZW46c2VjcmV0"}}}`, "JG9hdXRodG9rZW46c2VjcmV0", `"nvcr.io"`, "Docker registry auth"},
		{"a password in a URL is removed", "proxy https://user:hunter2pass@proxy.example.com:3128", "hunter2pass", "proxy.example.com", "credential in a URL"},
		{"a YAML password is removed", "smtp:\n  password: correct-horse-battery\n  user: ops", "correct-horse-battery", "user: ops", "value of a credential-like key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRedactor()
			got := r.Text("f.log", tc.in)
			if strings.Contains(got, tc.secret) {
				t.Errorf("secret survived:\n%s", got)
			}
			if !strings.Contains(got, tc.keep) || !strings.Contains(got, Redacted) {
				t.Errorf("redacted too much or nothing:\n%s", got)
			}
			if !slices.ContainsFunc(r.Redactions(), func(x Redaction) bool { return x.File == "f.log" && x.What == tc.what && x.Count > 0 }) {
				t.Errorf("redactions %+v lack %q", r.Redactions(), tc.what)
			}
			for _, x := range r.Redactions() {
				if strings.Contains(x.What, tc.secret) {
					t.Errorf("the manifest entry holds the value: %+v", x)
				}
			}
		})
	}
}

func TestTextRedactionLeavesOrdinaryTextAlone(t *testing.T) {
	for _, in := range []string{
		"secretName: licensing-config",
		"tokenFile: /etc/nvidia/ClientConfigToken/client_configuration_token.tok",
		`"secret":{"secretName":"ngc-secret"}`,
		"serviceAccountToken:\n  expirationSeconds: 3607\n  path: token",
		"- key: nvidia.com/gpu\n  operator: Exists",
		"token: REDACTED",
		"I1126 validation of driver passed on node gpu-0",
	} {
		r := NewRedactor()
		if got := r.Text("f", in); got != in || len(r.Redactions()) != 0 {
			t.Errorf("%q became %q (%+v)", in, got, r.Redactions())
		}
	}
}

func TestValueRedaction(t *testing.T) {
	values := `
driver:
  env:
  - name: NGC_API_KEY
    value: legacy-ngc-key-0123
  - name: DRIVER_TYPE
    value: vgpu
  licensingConfig:
    secretName: licensing-config
    nlsEnabled: true
toolkit:
  env:
  - name: CONTAINERD_CONFIG
    value: /etc/containerd/config.toml
ngc:
  apiKey: legacy-ngc-key-0123
proxy:
  password: hunter2
daemonsets:
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
`
	var tree any
	if err := yaml.Unmarshal([]byte(values), &tree); err != nil {
		t.Fatal(err)
	}
	r := NewRedactor()
	out, err := json.Marshal(r.Value("values.yaml", "", tree))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, gone := range []string{"legacy-ngc-key-0123", "hunter2"} {
		if strings.Contains(s, gone) {
			t.Errorf("%s survived: %s", gone, s)
		}
	}
	for _, kept := range []string{"licensing-config", "vgpu", "/etc/containerd/config.toml", `"key":"nvidia.com/gpu"`, "kubernetes.io/hostname", `"nlsEnabled":true`} {
		if !strings.Contains(s, kept) {
			t.Errorf("%s was redacted: %s", kept, s)
		}
	}
	var whats []string
	for _, x := range r.Redactions() {
		whats = append(whats, x.What)
	}
	want := []string{"driver.env[NGC_API_KEY].value", "ngc.apiKey", "proxy.password"}
	if !slices.Equal(whats, want) {
		t.Errorf("redactions %v, want %v", whats, want)
	}
}

func TestSensitiveKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"password", true}, {"apiKey", true}, {"NGC_API_KEY", true}, {"licenseKey", true}, {"clientSecret", true},
		{"token", true}, {"AWS_SECRET_ACCESS_KEY", true}, {"credentials", true}, {".dockerconfigjson", true},
		{"key", false}, {"topologyKey", false}, {"secretName", false}, {"tokenFile", false}, {"passwordRef", false},
		{"imagePullSecrets", true}, {"expirationSeconds", false}, {"name", false},
	} {
		if got := sensitiveKey(tc.key); got != tc.want {
			t.Errorf("sensitiveKey(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
}
