#!/bin/sh
# A first sandboxed script: shows what the sandbox lets it see and do.
echo "running as $(id -un) (uid $(id -u)) on host '$(hostname)', in $(pwd)"
echo "HOME=$HOME; environment variables visible: $(env | cut -d= -f1 | sort | tr '\n' ' ')"
echo "scratch" > /tmp/scratch && echo "private /tmp: writable"
if cat /etc/shadow >/dev/null 2>&1; then echo "/etc/shadow: READABLE"; else echo "/etc/shadow: masked"; fi
if touch /usr/vg-probe 2>/dev/null; then echo "/usr: WRITABLE"; else echo "/usr: read-only"; fi
if ls /root >/dev/null 2>&1; then echo "/root: VISIBLE"; else echo "/root: hidden"; fi
echo "processes visible: $(ls /proc | grep -c '^[0-9]')"
grep -E '^(NoNewPrivs|Seccomp|CapEff)' /proc/self/status
