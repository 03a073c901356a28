package docker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
)

// tlsOn reports whether the captured environment turns TLS on for the default context, as the
// client's --tls and --tlsverify defaults do.
func tlsOn(env []string) bool {
	return envValue(env, "DOCKER_TLS_VERIFY") != "" || envValue(env, "DOCKER_TLS") != ""
}

// certDir is where the default context's TLS files live: DOCKER_CERT_PATH, else the client's
// configuration directory (DOCKER_CONFIG, else ~/.docker), all from the captured environment.
func certDir(env []string) string {
	if d := envValue(env, "DOCKER_CERT_PATH"); d != "" {
		return d
	}
	if d := envValue(env, "DOCKER_CONFIG"); d != "" {
		return d
	}
	return filepath.Join(envValue(env, "HOME"), ".docker")
}

func presentFiles(dir string, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// loadTLS builds the TLS configuration of the resolved endpoint the way the docker client does
// for a context endpoint: none unless the context has TLS material or skips verification; the
// context's CA as the only root when it has one; its key pair when it has both halves.
func loadTLS(name string, doc contextDoc, env []string) (*tls.Config, error) {
	files := doc.TLSMaterial["docker"]
	skip := doc.Endpoints.Docker.SkipTLSVerify
	if len(files) == 0 && !skip {
		return nil, nil
	}
	dir := certDir(env)
	if name != "default" {
		dir = filepath.Join(doc.Storage.TLSPath, "docker")
	}
	read := func(n string) ([]byte, error) {
		for _, f := range files {
			if f == n {
				return os.ReadFile(filepath.Join(dir, n))
			}
		}
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: skip} //nolint:gosec // the context asked for it
	ca, err := read("ca.pem")
	if err != nil {
		return nil, err
	}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("ca.pem holds no certificate")
		}
		conf.RootCAs = pool
	}
	cert, err := read("cert.pem")
	if err != nil {
		return nil, err
	}
	key, err := read("key.pem")
	if err != nil {
		return nil, err
	}
	if cert != nil && key != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}
