// Package console tests the operator console in a real browser: Debian's chromium, headless,
// driven over the DevTools protocol by chromedp, against an engine on real Docker and an
// embedded NATS server whose users have different permissions.
package console
