// What `ChildProcess` (TallyLoad) needs of the C library beyond what Swift's Glibc module shows: glibc declares
// `pipe2` and `posix_spawn_file_actions_addclosefrom_np` only under _GNU_SOURCE, which that module is built
// without; spawn.c defines it and wraps the two.
#ifndef CSPAWN_H
#define CSPAWN_H

#include <spawn.h>

/// A pipe whose two ends are close-on-exec from the start (`pipe2(fds, O_CLOEXEC)`), so no process that
/// another thread spawns meanwhile inherits them. Where `pipe2` is missing (Darwin) it is `pipe` followed by
/// `FD_CLOEXEC`, and the spawns there use `POSIX_SPAWN_CLOEXEC_DEFAULT` instead. 0, or -1 with `errno`.
int cspawn_pipe_cloexec(int fds[2]);

/// Adds to `actions` the closing of every descriptor from `lowest` up in the child
/// (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34 and later); ENOSYS where the C library lacks it.
int cspawn_addclosefrom(posix_spawn_file_actions_t *actions, int lowest);

#endif
