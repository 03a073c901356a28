package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/sandbox"
)

// attachInput sends this process's standard input to the process id, and returns what puts
// the local terminal back. With a terminal on both sides the local one is raw (every key,
// Ctrl-C included, goes to the process's terminal) and its size follows the local one's;
// without one, the end of the local input closes the process's.
func attachInput(ctx context.Context, sb *client.Sandbox, id string, tty bool) (restore func()) {
	fd := int(os.Stdin.Fd())
	restore = func() {}
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if tty && err == nil {
		raw := *old
		makeRaw(&raw)
		if unix.IoctlSetTermios(fd, unix.TCSETS, &raw) == nil {
			winch := make(chan os.Signal, 1)
			signal.Notify(winch, syscall.SIGWINCH)
			resize := func() {
				if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil && ws.Row > 0 && ws.Col > 0 {
					_ = sb.ResizeProcess(ctx, id, sandbox.TerminalSize{Rows: ws.Row, Cols: ws.Col})
				}
			}
			resize()
			go func() {
				for range winch {
					resize()
				}
			}()
			restore = func() {
				signal.Stop(winch)
				close(winch)
				_ = unix.IoctlSetTermios(fd, unix.TCSETS, old)
			}
		}
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := os.Stdin.Read(buf)
			if n > 0 && sb.WriteProcessStdin(ctx, id, buf[:n]) != nil {
				return
			}
			if err != nil {
				if !tty {
					_ = sb.CloseProcessStdin(ctx, id)
				}
				return
			}
		}
	}()
	return restore
}

// makeRaw sets t as cfmakeraw(3) does.
func makeRaw(t *unix.Termios) {
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
}
