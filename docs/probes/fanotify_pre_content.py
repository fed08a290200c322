# Probe (docs/undo.md, "Background commands"): do fanotify pre-content events
# (FAN_PRE_ACCESS) fire before a write, a truncate, a create, an unlink and a rename on this
# kernel? Run as root: python3 fanotify_pre_content.py DIR (DIR holding f.txt, on the file
# system to probe; the mark covers that whole file system while it runs).
import ctypes, os, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
FAN_CLASS_PRE_CONTENT = 0x08
FAN_CLOEXEC = 0x01
FAN_REPORT_FID = 0x200
FAN_MARK_ADD = 0x01
FAN_MARK_FILESYSTEM = 0x100
FAN_MARK_MOUNT = 0x10
FAN_PRE_ACCESS = 0x00100000
FAN_OPEN_PERM = 0x00010000
FAN_ACCESS_PERM = 0x00020000
FAN_ALLOW = 0x01
AT_FDCWD = -100
d = sys.argv[1]
fd = libc.fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_CLOEXEC, os.O_RDWR)
if fd < 0:
    print("fanotify_init failed", os.strerror(ctypes.get_errno())); sys.exit(1)
for flags, name in [(FAN_MARK_FILESYSTEM, "filesystem"), (FAN_MARK_MOUNT, "mount"), (0, "inode")]:
    r = libc.fanotify_mark(fd, FAN_MARK_ADD | flags, ctypes.c_uint64(FAN_PRE_ACCESS), AT_FDCWD, d.encode() + b"/f.txt" if flags == 0 else d.encode())
    print("mark", name, "->", "ok" if r == 0 else os.strerror(ctypes.get_errno()))
    if r == 0:
        break
events = []
def reader():
    while True:
        buf = os.read(fd, 4096)
        off = 0
        while off < len(buf):
            event_len, vers, _, meta_len, mask, efd, pid = struct.unpack_from("IBBHQii", buf, off)
            path = os.readlink(f"/proc/self/fd/{efd}") if efd >= 0 else "?"
            events.append((hex(mask), path, pid))
            os.write(fd, struct.pack("iI", efd, FAN_ALLOW))
            if efd >= 0: os.close(efd)
            off += event_len
threading.Thread(target=reader, daemon=True).start()
f = os.path.join(d, "f.txt")
steps = [
    ("read", lambda: open(f).read()),
    ("write", lambda: open(f, "r+").write("x")),
    ("append", lambda: open(f, "a").write("y")),
    ("truncate", lambda: os.truncate(f, 1)),
    ("create", lambda: open(os.path.join(d, "new.txt"), "w").write("n")),
    ("rename", lambda: os.rename(os.path.join(d, "new.txt"), os.path.join(d, "new2.txt"))),
    ("unlink", lambda: os.unlink(os.path.join(d, "new2.txt"))),
]
for name, step in steps:
    before = len(events)
    step()
    time.sleep(0.2)
    print(f"{name:9} events: {events[before:]}")
