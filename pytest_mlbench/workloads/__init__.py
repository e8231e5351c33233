"""The workload spec (Workload, Shape, Task, tolerances), optimizers as data, discovery of
workload folders, seeded data and the cases collected from them."""
