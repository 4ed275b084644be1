"""Exporter pages for the remote-hardware tests, and a tiny HTTP server that serves them.

NVIDIA's DCGM exporter and nvitop's exporter cannot run without an NVIDIA GPU, so their
pages here are fixtures written from their documented metric names:

- DCGM: dcgm-exporter's default counters (``DCGM_FI_DEV_GPU_UTIL`` %, ``DCGM_FI_DEV_FB_USED``
  / ``DCGM_FI_DEV_FB_FREE`` MiB, ``DCGM_FI_DEV_POWER_USAGE`` W, ``DCGM_FI_DEV_GPU_TEMP`` °C,
  ``DCGM_FI_DEV_SM_CLOCK`` / ``DCGM_FI_DEV_MEM_CLOCK`` MHz,
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` mJ; labels gpu, UUID, device, modelName,
  Hostname).
- nvitop: nvitop-exporter/nvitop_exporter/exporter.py in XuehaiPan/nvitop creates its
  gauges with prometheus_client and a unit, so the unit ends the name
  (``gpu_utilization_Percentage``, ``gpu_memory_used_MiB``, ``host_cpu_percent_Percentage``,
  ...; labels hostname, index, devicename, uuid).

node_exporter is not a fixture: the tests run the real one.
"""

from __future__ import annotations

import http.server
import threading

_DCGM_LABELS = (
    'gpu="{i}",UUID="GPU-{i}a1b2c3d4",device="nvidia{i}",'
    'modelName="NVIDIA H100 80GB HBM3",Hostname="dgx-07"'
)


def dcgm_page(
    util: tuple[float, float] = (97.0, 3.0), energy_mj: tuple[int, int] = (81234567, 2345678)
) -> str:
    """Two H100s as dcgm-exporter shows them (GPU 0 busy, GPU 1 idle); ``energy_mj``:
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ since the driver loaded (a counter)."""
    rows = [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", (1980, 345)),
        ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", (2619, 2619)),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", (61, 33)),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", (612.25, 71.5)),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", util),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", (81, 0)),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", (8000, 80500)),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", (72559, 59)),
        ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", (530, 530)),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            energy_mj,
        ),
    ]
    out = []
    for name, kind, help_text, values in rows:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        for i, v in enumerate(values):
            out.append(f"{name}{{{_DCGM_LABELS.format(i=i)}}} {v}\n")
    return "".join(out)


_NV_LABELS = (
    'hostname="10.0.0.7",index="{i}",devicename="NVIDIA GeForce RTX 4090",uuid="GPU-{i}ffee"'
)


def nvitop_page() -> str:
    """One RTX 4090 and the host as nvitop-exporter shows them (NaN: not available)."""
    gpu = [
        ("gpu_utilization_Percentage", "GPU utilization (%).", 64.0),
        ("gpu_memory_utilization_Percentage", "GPU memory utilization (%).", 40.0),
        ("gpu_memory_total_MiB", "GPU memory total (MiB).", 24564.0),
        ("gpu_memory_used_MiB", "GPU memory used (MiB).", 20110.0),
        ("gpu_memory_free_MiB", "GPU memory free (MiB).", 4454.0),
        ("gpu_clock_sm_MHz", "GPU SM clock (MHz).", 2520.0),
        ("gpu_clock_memory_MHz", "GPU memory clock (MHz).", 10501.0),
        ("gpu_power_usage_W", "GPU power usage (W).", 355.5),
        ("gpu_temperature_C", "GPU temperature (C).", 66.0),
        ("gpu_fan_speed_Percentage", "GPU fan speed (%).", float("nan")),
    ]
    host = [
        ("host_uptime_Second", "Host uptime (s).", 86400.0),
        ("host_cpu_percent_Percentage", "Host CPU percent (%).", 23.5),
        ("host_virtual_memory_total_MiB", "Host virtual memory total (MiB).", 64000.0),
        ("host_virtual_memory_used_MiB", "Host virtual memory used (MiB).", 12000.0),
    ]
    out = [
        "# HELP nvitop_info NVITOP Prometheus Exporter.\n# TYPE nvitop_info gauge\n",
        'nvitop_info{hostname="10.0.0.7",device_count="1",driver_version="550.54.14",'
        'cuda_driver_version="12.4"} 1.0\n',
    ]
    for name, help_text, v in host:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
        out.append(f'{name}{{hostname="10.0.0.7"}} {_num(v)}\n')
    for name, help_text, v in gpu:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
        out.append(f"{name}{{{_NV_LABELS.format(i=0)}}} {_num(v)}\n")
    return "".join(out)


def _num(v: float) -> str:
    return "NaN" if v != v else repr(v)


class MetricsServer:
    """Serves ``self.page`` at /metrics on a loopback port; stop and start it again on the
    same port to cut and restore a link."""

    def __init__(self, page: str, port: int = 0) -> None:
        self.page = page
        self.status = 200
        self.scrapes = 0
        self._port = port
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}/metrics"

    def start(self) -> MetricsServer:
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                owner.scrapes += 1
                body = owner.page.encode()
                self.send_response(owner.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
