/* Tries system calls inside a container and prints one line per call:
 * NAME=0 when it succeeded, NAME=ERRNO when it failed. Built static by the
 * engine tests (gcc -static), so it runs in an image with no libc. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *name, long rc) {
  printf("%s=%d\n", name, rc < 0 ? errno : 0);
}

/* A call the runtime may answer by killing: made in a child, which exits
 * with the call's errno (or 0); a kill is reported as sigN. */
static void in_child(const char *name, long nr, long a0) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    long rc = syscall(nr, a0, 0L, 0L, 0L);
    _exit(rc < 0 ? errno : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    printf("%s=sig%d\n", name, WTERMSIG(status));
  else
    printf("%s=%d\n", name, WEXITSTATUS(status));
}

int main(void) {
  char c = 'x';
  report("unshare_user", unshare(CLONE_NEWUSER));
  report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
  report("personality_read_implies_exec", syscall(SYS_personality, 0x0400000));
  report("personality_query", syscall(SYS_personality, 0xffffffffUL) < 0 ? -1 : 0);
  /* In a child: once traced, a signal would stop the prober. */
  in_child("ptrace_traceme", SYS_ptrace, PTRACE_TRACEME);
  report("ioctl_tiocsti", syscall(SYS_ioctl, 0, TIOCSTI, &c));
  report("ioctl_tiocsti_high_garbage", syscall(SYS_ioctl, 0, 0xffffffff00000000UL | TIOCSTI, &c));
  report("socket_packet", syscall(SYS_socket, AF_PACKET, SOCK_RAW, 0));
  report("socket_inet_raw", syscall(SYS_socket, AF_INET, SOCK_RAW, 1));
  report("socket_inet_stream", syscall(SYS_socket, AF_INET, SOCK_STREAM, 0) < 0 ? -1 : 0);
  report("clone3", syscall(SYS_clone3, 0, 0));
  report("io_uring_setup", syscall(SYS_io_uring_setup, 1, 0));
  report("getpid", syscall(SYS_getpid) < 0 ? -1 : 0);
  in_child("x32_getpid", 0x40000000 | SYS_getpid, 0);
  in_child("unknown_1000", 1000, 0);
  fflush(stdout);
  return 0;
}
