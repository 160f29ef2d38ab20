/* Preloaded (LD_PRELOAD) into a Python process by tests/faults/test_clean_exit.py: makes the schedule
 * that a busy machine makes only by chance happen every time.
 *
 * A native thread (a pyarrow worker, say) that drops its last reference to a Python object from a C++
 * destructor must take the GIL to do it. If the interpreter has begun to finalize by then, CPython 3.11
 * ends that thread with pthread_exit; the forced unwind cannot pass the destructor (noexcept), so the C++
 * runtime calls std::terminate: "terminate called without an active exception", SIGABRT, status 134.
 *
 * This shim wraps PyGILState_Ensure. When the caller is a thread other than the main one and a
 * destructor is on its stack, it holds the thread until the interpreter is finalizing (as if the
 * scheduler had preempted it that long), at most HOLD_MS milliseconds (default 3000), then lets it go
 * and prints one line on stderr:
 *   late_release: thread TID held MS ms in FRAME, finalizing=1|0
 * finalizing=1: the thread reached the interpreter's shutdown (the case that aborts); finalizing=0: the
 * main thread was waiting for it (it could not finalize), which is harmless. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern int _Py_IsFinalizing(void);
typedef int (*ensure_fn)(void);

/* A C++ destructor (mangled D0Ev, D1Ev, D2Ev) among the callers: the frame's name goes to `which`. */
static int in_destructor(char *which, size_t size) {
    void *frames[10];
    int count = backtrace(frames, 10), found = 0;
    char **names = backtrace_symbols(frames, count);
    for (int i = 1; names != NULL && i < count && !found; i++) {
        if (strstr(names[i], "D0Ev") || strstr(names[i], "D1Ev") || strstr(names[i], "D2Ev")) {
            found = 1;
            snprintf(which, size, "%s", names[i]);
        }
    }
    free(names);
    return found;
}

int PyGILState_Ensure(void) {
    static ensure_fn real;
    char which[512];
    if (real == NULL) {
        real = (ensure_fn)dlsym(RTLD_NEXT, "PyGILState_Ensure");
    }
    if (syscall(SYS_gettid) != getpid() && in_destructor(which, sizeof which)) {
        const char *bound = getenv("HOLD_MS");
        int steps = (bound != NULL ? atoi(bound) : 3000) / 5, waited = 0;
        while (!_Py_IsFinalizing() && waited < steps) {
            usleep(5000);
            waited++;
        }
        fprintf(stderr, "late_release: thread %ld held %d ms in %s, finalizing=%d\n", (long)syscall(SYS_gettid),
                waited * 5, which, _Py_IsFinalizing());
    }
    return real();
}
