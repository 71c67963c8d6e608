/* What a seccomp user notification costs a traced program on this machine, without
 * Vectra Guard: 2,000 fork+execve of /bin/true, timed, with no filter (mode 0), with
 * execve sent to a listener that only answers (mode 1), and with exit_group sent too
 * (mode 2), and with execve sent to a listener that makes the reads Vectra Guard's tracer
 * makes while an exec waits (mode 3: the path and argv from the process's memory, a pidfd,
 * the path opened and its metadata, the cwd link) and writes a line after each answer;
 * a second argument turns on SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6+), as the
 * tracer does. The floors under bench/records-interleaved.py's overhead.
 *
 *   gcc -O2 -o /tmp/notify_roundtrip bench/notify_roundtrip.c
 *   for i in 1 2 3 4 5 6; do for m in "0" "1 s" "2 s" "3 s"; do /tmp/notify_roundtrip $m; done; done
 *
 * Compare medians per mode; interleave the modes, as a shared machine needs. */
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <linux/audit.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <poll.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <sys/stat.h>
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS 0x40082104
#endif
static int trap_exit;
static int install(void){
  struct sock_filter f[] = {
    BPF_STMT(BPF_LD|BPF_W|BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP|BPF_JEQ|BPF_K, __NR_execve, 2, 0),
    BPF_JUMP(BPF_JMP|BPF_JEQ|BPF_K, trap_exit ? __NR_exit_group : 0xffff, 1, 0),
    BPF_STMT(BPF_RET|BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_RET|BPF_K, SECCOMP_RET_USER_NOTIF),
  };
  struct sock_fprog p = {5, f};
  prctl(PR_SET_NO_NEW_PRIVS,1,0,0,0);
  return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p);
}
/* Mode 3: what the tracer reads of an exec while it waits. */
static void read_exec(const struct seccomp_notif *n, char *line, size_t size){
  char path[4096] = "", arg0[256] = "", cwd[4096] = "", proc[64];
  unsigned long argv0 = 0;
  struct iovec local[2] = {{path, sizeof path - 1}, {&argv0, sizeof argv0}};
  struct iovec remote[2] = {{(void *)n->data.args[0], sizeof path - 1}, {(void *)n->data.args[1], sizeof argv0}};
  process_vm_readv(n->pid, local, 1, remote, 1, 0);
  process_vm_readv(n->pid, local + 1, 1, remote + 1, 1, 0);
  struct iovec l2 = {arg0, sizeof arg0 - 1}, r2 = {(void *)argv0, sizeof arg0 - 1};
  if (argv0) process_vm_readv(n->pid, &l2, 1, &r2, 1, 0);
  int pidfd = syscall(SYS_pidfd_open, n->pid, 0);
  int file = open(path, O_PATH | O_CLOEXEC);
  struct stat st; if (file >= 0) fstat(file, &st);
  snprintf(proc, sizeof proc, "/proc/%d/cwd", n->pid);
  ssize_t len = readlink(proc, cwd, sizeof cwd - 1); if (len > 0) cwd[len] = 0;
  snprintf(line, size, "exec pid=%d cwd=%s path=%s argv=%s\n", n->pid, cwd, path, arg0);
  if (file >= 0) close(file);
  if (pidfd >= 0) close(pidfd);
}
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec/1e9;}
static void sendfd(int s,int fd){ char b[CMSG_SPACE(sizeof(int))]; struct msghdr m={0}; char c='x'; struct iovec io={&c,1}; m.msg_iov=&io;m.msg_iovlen=1;m.msg_control=b;m.msg_controllen=sizeof b; struct cmsghdr*h=CMSG_FIRSTHDR(&m);h->cmsg_level=SOL_SOCKET;h->cmsg_type=SCM_RIGHTS;h->cmsg_len=CMSG_LEN(sizeof(int));memcpy(CMSG_DATA(h),&fd,sizeof fd);sendmsg(s,&m,0);}
static int recvfd(int s){ char b[CMSG_SPACE(sizeof(int))]; struct msghdr m={0}; char c; struct iovec io={&c,1}; m.msg_iov=&io;m.msg_iovlen=1;m.msg_control=b;m.msg_controllen=sizeof b; recvmsg(s,&m,0); int fd; memcpy(&fd,CMSG_DATA(CMSG_FIRSTHDR(&m)),sizeof fd); return fd;}
int main(int argc,char**argv){
  int mode = atoi(argv[1]); trap_exit = mode==2; int sync = argc>2;
  int sp[2]; socketpair(AF_UNIX,SOCK_STREAM,0,sp);
  double t0=now();
  pid_t c=fork();
  if(c==0){ int l = mode? install(): -1; if(mode) sendfd(sp[0],l);
    for(int i=0;i<2000;i++){ pid_t p=fork(); if(!p){ execl("/bin/true","true",NULL); _exit(1);} waitpid(p,0,0);} _exit(0);}
  if(mode){ int l=recvfd(sp[1]);
    if(sync) { unsigned long long fl=1; if (ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, fl)) perror("sync"); }
    struct seccomp_notif n; struct seccomp_notif_resp r; char line[8192];
    int log = mode == 3 ? open("/tmp/notify_roundtrip.log", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0600) : -1;
    for(;;){ struct pollfd pf={l,POLLIN,0}; poll(&pf,1,-1); if(pf.revents&POLLHUP) break;
      memset(&n,0,sizeof n); if(ioctl(l,SECCOMP_IOCTL_NOTIF_RECV,&n)) continue;
      if (mode == 3) read_exec(&n, line, sizeof line);
      memset(&r,0,sizeof r); r.id=n.id; r.flags=SECCOMP_USER_NOTIF_FLAG_CONTINUE; ioctl(l,SECCOMP_IOCTL_NOTIF_SEND,&r);
      if (mode == 3 && write(log, line, strlen(line)) < 0) perror("write");} }
  waitpid(c,0,0);
  printf("mode %d sync %d: %.1f us/program\n",mode,sync,(now()-t0)/2000*1e6);
}
