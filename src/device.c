/* Choosing the backend a command computes on (see device.h). */
#include "device.h"

#include <string.h>

#include "log.h"

int yc_device_open(const char *spec, int threads, bool announce, yc_backend **out)
{
    *out = NULL;
    if (!spec || !spec[0])
        spec = "auto";
    if (strcmp(spec, "auto") != 0 && strcmp(spec, "cpu") != 0)
        return yc_error_status(YC_EUSAGE, "unknown device '%s': this version computes on the CPU "
                               "backend only (--device cpu or auto)", spec);
    int status = yc_backend_cpu_new(out, threads);
    if (status)
        return yc_error_context(status, "starting the CPU backend");
    if (announce)
        yc_info("device: %s\n", (*out)->info.name);
    return YC_OK;
}
