import ctypes, os, select, struct, sys, time
# The host-tools hint watcher: prints the name of each file renamed into the calls directory
# or the transport directory, one a line, and exits when the transport directory goes (the
# host removed it) or its deadline passes. What it prints is a hint only: the host reads
# every request through its own file plane.
transport, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
calls = os.path.join(transport, "host_tool_calls")
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_CLOEXEC)
if fd < 0:
    print("none", flush=True)
    sys.exit(0)
os.makedirs(calls, exist_ok=True)
MOVED_TO, GONE = 0x80, 0x400 | 0x800 | 0x8000  # IN_MOVED_TO; IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED
top = libc.inotify_add_watch(fd, transport.encode(), MOVED_TO | 0x400 | 0x800)
if top < 0 or libc.inotify_add_watch(fd, calls.encode(), MOVED_TO) < 0:
    print("none", flush=True)
    sys.exit(0)
print("ready", flush=True)
while True:
    left = deadline - time.monotonic()
    if left <= 0 or not os.path.isdir(transport):
        sys.exit(0)
    if not select.select([fd], [], [], min(left, 1.0))[0]:
        continue
    buf, out = os.read(fd, 65536), []
    i = 0
    while i + 16 <= len(buf):
        wd, mask, _, size = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + size].rstrip(b"\0").decode("utf-8", "replace")
        i += 16 + size
        if wd == top and mask & GONE:
            sys.exit(0)
        if mask & MOVED_TO:
            out.append(name)
    if out:
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
