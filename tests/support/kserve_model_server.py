"""KServe's own ModelServer (PyPI ``kserve``) serving an ONNX model over the V2 protocol, so
our remote backend is checked against an implementation we did not write.

Run as a subprocess (kserve and tritonclient.grpc cannot share one process: both register the
same protobuf names): ``python kserve_model_server.py MODEL.onnx NAME --http_port P
--grpc_port Q`` (the last two are KServe's own flags).
"""

from __future__ import annotations

import sys

import kserve
import numpy as np
import onnxruntime as ort
from kserve import InferOutput, InferRequest, InferResponse, ModelServer

_TYPES = {"tensor(float)": "FP32", "tensor(int64)": "INT64", "tensor(int32)": "INT32"}


class OnnxModel(kserve.Model):
    def __init__(self, name: str, path: str) -> None:
        super().__init__(name)
        self.path = path
        self.session: ort.InferenceSession | None = None

    def load(self) -> bool:
        self.session = ort.InferenceSession(self.path, providers=["CPUExecutionProvider"])
        self.ready = True
        return True

    @staticmethod
    def _types(args) -> list[dict]:
        return [
            {
                "name": a.name,
                "datatype": _TYPES[a.type],
                "shape": [d if isinstance(d, int) else -1 for d in a.shape],
            }
            for a in args
        ]

    def get_input_types(self) -> list[dict]:
        return self._types(self.session.get_inputs())

    def get_output_types(self) -> list[dict]:
        return self._types(self.session.get_outputs())

    async def predict(self, payload: InferRequest, headers=None, response_headers=None):
        feed = {i.name: i.as_numpy().astype(np.float32) for i in payload.inputs}
        names = [o.name for o in self.session.get_outputs()]
        outputs = []
        for name, value in zip(names, self.session.run(names, feed), strict=True):
            output = InferOutput(name=name, shape=list(value.shape), datatype="FP32")
            output.set_data_from_numpy(value, binary_data=True)
            outputs.append(output)
        return InferResponse(payload.id or "", self.name, outputs)


if __name__ == "__main__":
    path, name = sys.argv[1], sys.argv[2]
    model = OnnxModel(name, path)
    model.load()
    ModelServer(workers=1, enable_docs_url=False).start([model])
