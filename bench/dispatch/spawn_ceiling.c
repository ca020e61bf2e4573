// Stricter spawn ceiling for the dispatch benchmark: runs N trials of /bin/sh -c 'echo loss=1',
// P at a time, with posix_spawn (vfork-style, as Sextant's worker does) instead of xargs's
// fork, capturing stdout on a pipe and parsing loss=, and nothing else: no store, no RPC.
//   usage: spawn_ceiling N P
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

struct slot {
  pid_t pid;
  int fd;
  char buf[256];
  size_t len;
};

static int start(struct slot* s) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  char* argv[] = {"/bin/sh", "-c", "echo loss=1", NULL};
  int rc = posix_spawn(&s->pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  if (rc != 0) return -1;
  s->fd = p[0];
  s->len = 0;
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: spawn_ceiling N P\n");
    return 2;
  }
  int n = atoi(argv[1]), par = atoi(argv[2]), started = 0, done = 0, bad = 0;
  struct slot slots[64];
  if (par < 1 || par > 64) return 2;
  for (int i = 0; i < par; ++i) slots[i].fd = -1;
  while (done < n) {
    struct pollfd fds[64];
    for (int i = 0; i < par; ++i) {
      if (slots[i].fd < 0 && started < n) {
        if (start(&slots[i]) != 0) return 1;
        ++started;
      }
      fds[i].fd = slots[i].fd;
      fds[i].events = POLLIN;
    }
    if (poll(fds, par, -1) < 0) continue;
    for (int i = 0; i < par; ++i) {
      if (slots[i].fd < 0 || fds[i].revents == 0) continue;
      struct slot* s = &slots[i];
      ssize_t r = read(s->fd, s->buf + s->len, sizeof(s->buf) - 1 - s->len);
      if (r > 0) {
        s->len += (size_t)r;
        continue;
      }
      close(s->fd);
      s->fd = -1;
      int status;
      waitpid(s->pid, &status, 0);
      s->buf[s->len] = 0;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || strncmp(s->buf, "loss=", 5) != 0 ||
          atof(s->buf + 5) != 1.0) {
        ++bad;
      }
      ++done;
    }
  }
  if (bad) fprintf(stderr, "spawn_ceiling: %d bad trials\n", bad);
  return bad ? 1 : 0;
}
