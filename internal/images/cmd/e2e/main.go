// Command e2e is the offline fixture's static program (egress-and-reap.md §5.4): "serve" is
// the HTTPS target server (GET / → 200, certificate from the environment), and the client
// verbs run inside a workload: "get" fetches a URL through the proxy the environment names
// and prints "code=NNN", "dial" opens a raw TCP connection, "resolve" looks a name up.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: e2e serve | get URL CA_B64 | dial HOST:PORT | resolve NAME")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "get":
		get(os.Args[2], os.Args[3])
	case "dial":
		c, err := net.DialTimeout("tcp", os.Args[2], 3*time.Second)
		if err != nil {
			fmt.Println("dial failed:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
	case "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, os.Args[2])
		if err != nil {
			fmt.Println("resolve failed:", err)
			os.Exit(1)
		}
		fmt.Println(addrs)
	default:
		os.Exit(2)
	}
}

func serve() {
	cert, err := tls.X509KeyPair([]byte(os.Getenv("E2E_CERT")), []byte(os.Getenv("E2E_KEY")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "certificate:", err)
		os.Exit(1)
	}
	srv := &http.Server{Addr: ":443", ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })}
	fmt.Println("serving on :443")
	if err := srv.ListenAndServeTLS("", ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func get(url, caB64 string) {
	pem, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		fmt.Println("code=000 bad CA")
		os.Exit(2)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Printf("code=000 err=%v\n", err)
		os.Exit(1)
	}
	resp.Body.Close()
	fmt.Printf("code=%d\n", resp.StatusCode)
}
