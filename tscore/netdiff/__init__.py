"""Running a torch network and its MindSpore twin side by side, and finding the first layer that differs."""
