package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// raw is the attack client: it opens a CONNECT to host:443 through the proxy HTTPS_PROXY
// names, starts TLS naming sni and offering alpn ("" offers none), trusting the system roots
// (SSL_CERT_FILE), writes the base64-decoded payload in one write and prints "alpn=P" and
// then "status=NNN" for each response status line it reads until the connection ends, or
// with all, every line it reads. A refused CONNECT prints "connect=<status line>", a failed
// handshake "handshake=failed".
func raw(host, sni, alpn, payloadB64 string, all bool) {
	payload, err := base64.StdEncoding.DecodeString(payloadB64)
	if err != nil {
		fmt.Println("bad payload")
		os.Exit(2)
	}
	proxy, err := url.Parse(os.Getenv("HTTPS_PROXY"))
	if err != nil || proxy.Host == "" {
		fmt.Println("no proxy")
		os.Exit(2)
	}
	c, err := net.DialTimeout("tcp", proxy.Host, 5*time.Second)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", host, host)
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 200") {
		fmt.Printf("connect=%s\n", strings.TrimSpace(line))
		return
	}
	for l, _ := br.ReadString('\n'); strings.TrimSpace(l) != ""; l, _ = br.ReadString('\n') {
	}
	roots, _ := x509.SystemCertPool()
	cfg := &tls.Config{ServerName: sni, RootCAs: roots, MinVersion: tls.VersionTLS12}
	if alpn != "" {
		cfg.NextProtos = strings.Split(alpn, ",")
	}
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		fmt.Println("handshake=failed")
		return
	}
	fmt.Printf("alpn=%s\n", tc.ConnectionState().NegotiatedProtocol)
	if _, err := tc.Write(payload); err != nil {
		fmt.Println("write:", err)
		return
	}
	rd := bufio.NewReader(tc)
	for {
		l, err := rd.ReadString('\n')
		if all {
			fmt.Print(l)
		} else if strings.HasPrefix(l, "HTTP/1.1 ") && len(l) >= 12 {
			fmt.Printf("status=%s\n", l[9:12])
		}
		if err == io.EOF || err != nil {
			return
		}
	}
}
