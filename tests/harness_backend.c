/* The test harness, its part in the backend layer: the CPU backend and the number of OpenCL devices
 * (tests/harness.h). */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef YC_HAVE_OPENCL
#include "cl_devices.h"
#endif
#include "device.h"
#include "log.h"

void yc_harness_cpu(yc_backend **be, int threads)
{
    ck_assert_msg(yc_device_open("cpu", threads, false, be) == YC_OK, "%s", yc_last_error());
}

int yc_harness_opencl_devices(void)
{
#ifdef YC_HAVE_OPENCL
    int fd[2], n = 0;
    if (pipe(fd) != 0)
        return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        yc_device_info *devs = NULL;
        int count = 0;
        if (yc_cl_list_devices(&devs, &count) != YC_OK)
            count = 0;
        _exit(write(fd[1], &count, sizeof count) == (ssize_t)sizeof count ? 0 : 1);
    }
    close(fd[1]);
    if (pid < 0 || read(fd[0], &n, sizeof n) != (ssize_t)sizeof n)
        n = 0;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return n;
#else
    return 0;
#endif
}
